#include "launcher/node_sync_records.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

std::vector<std::string> split_tabs(const std::string& text) {
  std::vector<std::string> fields;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, '\t');) fields.push_back(field);
  return fields;
}

// A whole decimal number in [min, max], or nothing (std::stoi would throw std::invalid_argument
// or std::out_of_range, which say neither what nor where).
std::optional<int> whole_number(const std::string& text, int min, int max) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max)
    return std::nullopt;
  return value;
}

// Field `name` of node r's entry, checked against what `lockstep run` accepts for it.
int entry_field(const std::string& entry, size_t r, const char* name, const std::string& text,
                int min, int max) {
  if (auto value = whole_number(text, min, max)) return *value;
  throw StoreError(detail::concat("node ", r, " registered a malformed entry '", entry, "': ", name,
                                  " '", text, "' is not a whole number in [", min, ", ", max,
                                  "]; every node must run the same lockstep version"));
}

}  // namespace

std::string node_entry(const NodeInfo& node, const std::string& run_id,
                       std::optional<int> master_port) {
  std::string entry =
      detail::concat(node.host, '\t', node.nproc, '\t', node.max_restarts, '\t', run_id);
  if (master_port) entry += detail::concat('\t', *master_port);
  return entry;
}

WorldLayout parse_world_layout(const std::vector<std::string>& entries, int node_rank,
                               int max_restarts) {
  WorldLayout layout;
  for (size_t r = 0; r < entries.size(); ++r) {
    auto fields = split_tabs(entries[r]);
    if (fields.size() < 4)
      throw StoreError(
          detail::concat("node ", r, " registered a malformed entry '", entries[r], "'"));
    // The ranges of --nproc-per-node and --max-restarts (launcher/options.cc).
    NodeInfo info{fields[0], entry_field(entries[r], r, "nproc", fields[1], 1, 1 << 16),
                  entry_field(entries[r], r, "max_restarts", fields[2], 0, 1 << 20)};
    if (info.max_restarts != max_restarts)
      throw ConfigError(detail::concat("node ", r, " (", info.host, ") runs with --max-restarts ",
                                       info.max_restarts, " but node ", node_rank, " with ",
                                       max_restarts, "; every node must run the same command"));
    if (layout.world_size > std::numeric_limits<int>::max() - info.nproc)
      throw StoreError(detail::concat("the nodes registered more than ",
                                      std::numeric_limits<int>::max(), " processes in all"));
    if (static_cast<int>(r) < node_rank) layout.rank_offset += info.nproc;
    layout.world_size += info.nproc;
    if (r == 0) {
      layout.run_id = fields[3];
      if (fields.size() < 5)
        throw StoreError(detail::concat("node 0 registered no MASTER_PORT ('", entries[r],
                                        "'): every node must run the same lockstep version"));
      layout.master_port = entry_field(entries[r], r, "master_port", fields[4], 1, 65535);
    }
    layout.nodes.push_back(info);
  }
  return layout;
}

std::string failure_report(const RemoteFailure& failure) {
  std::string what = failure.what;  // one field: no tabs or line breaks
  std::replace_if(
      what.begin(), what.end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
  return detail::concat(failure.node_rank, '\t', failure.exit_code, '\t', what, '\t',
                        failure.restartable ? 1 : 0,
                        failure.membership_change ? "\tmembership" : "");
}

RemoteFailure parse_failure_report(const std::string& text) {
  auto fields = split_tabs(text);
  std::optional<int> node, code;
  if (fields.size() >= 4) {
    node = whole_number(fields[0], 0, 1 << 16);  // --node-rank's range
    code =
        whole_number(fields[1], std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  }
  constexpr size_t kShown = 200;  // of a report that may be anything
  if (!node || !code)
    return RemoteFailure{
        .node_rank = 0,
        .exit_code = 1,
        .what = detail::concat("malformed failure report '", text.substr(0, kShown), "'")};
  return RemoteFailure{.node_rank = *node,
                       .exit_code = *code,
                       .what = fields[2],
                       .restartable = fields[3] == "1",
                       .membership_change = fields.size() >= 5 && fields[4] == "membership"};
}

}  // namespace lockstep::launcher
