#include "launcher/option_values.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace lockstep::launcher {

using std::chrono::milliseconds;

int parse_int(std::string_view option, std::string_view text, int min, int max) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw UsageError(detail::concat("--", option, ": '", text, "' is not a whole number"));
  if (value < min || value > max)
    throw UsageError(detail::concat("--", option, " ", value,
                                    " is out of range: give a number in [", min, ", ", max, "]"));
  return value;
}

milliseconds parse_seconds(std::string_view option, std::string_view text) {
  std::string copy(text);
  char* end = nullptr;
  double seconds = std::strtod(copy.c_str(), &end);
  if (copy.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > 1e7)
    throw UsageError(
        detail::concat("--", option, ": '", text, "' is not a number of seconds (e.g. 30 or 0.5)"));
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

namespace {

Streams parse_streams(std::string_view option, std::string_view text) {
  return static_cast<Streams>(parse_int(option, text, 0, 3));
}

}  // namespace

StreamSelection parse_selection(std::string_view option, std::string_view text) {
  StreamSelection selection;
  if (text.find(':') == std::string_view::npos) {
    selection.all = parse_streams(option, text);
    return selection;
  }
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto colon = item.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(
          detail::concat("--", option, ": '", item, "' is not LOCAL_RANK:STREAMS (e.g. 0:3,1:2)"));
    int rank = parse_int(option, item.substr(0, colon), 0, 1 << 20);
    selection.per_local_rank[rank] = parse_streams(option, item.substr(colon + 1));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return selection;
}

std::set<int> parse_rank_list(std::string_view option, std::string_view text) {
  std::set<int> ranks;
  while (!text.empty()) {
    auto comma = text.find(',');
    ranks.insert(parse_int(option, text.substr(0, comma), 0, 1 << 20));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (ranks.empty()) throw UsageError(detail::concat("--", option, " needs at least one rank"));
  return ranks;
}

void parse_nnodes(LaunchOptions& o, std::string_view v) {
  constexpr int kMaxNodes = 1 << 16;
  auto colon = v.find(':');
  if (colon == std::string_view::npos) {
    o.nnodes = o.nnodes_min = o.nnodes_max = parse_int("nnodes", v, 1, kMaxNodes);
    o.elastic = false;
    return;
  }
  std::string_view min = v.substr(0, colon), max = v.substr(colon + 1);
  if (min.empty() || max.empty())
    throw UsageError(detail::concat("--nnodes: '", v, "' lacks ", min.empty() ? "MIN" : "MAX",
                                    "; give N or MIN:MAX (e.g. 2:4)"));
  auto bound = [&](std::string_view which, std::string_view text) {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
      throw UsageError(detail::concat("--nnodes ", v, ": ", which, " '", text,
                                      "' is not a whole number; give N or MIN:MAX (e.g. 2:4)"));
    if (value < 1 || value > kMaxNodes)
      throw UsageError(detail::concat("--nnodes ", v, ": ", which, " ", value,
                                      " is out of range: give a number in [1, ", kMaxNodes, "]"));
    return value;
  };
  o.nnodes_min = bound("MIN", min);
  o.nnodes_max = bound("MAX", max);
  if (o.nnodes_min > o.nnodes_max)
    throw UsageError(detail::concat("--nnodes ", v, ": MIN ", o.nnodes_min, " is larger than MAX ",
                                    o.nnodes_max, " (give MIN:MAX with MIN <= MAX)"));
  o.nnodes = o.nnodes_max;
  o.elastic = true;
}

}  // namespace lockstep::launcher
