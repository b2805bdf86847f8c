#include "cli/bench_option_values.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>

namespace lockstep::cli::bench {

using detail::concat;

std::string op_names() {
  std::string out;
  for (BenchOp op : kAllBenchOps) out += concat(out.empty() ? "" : ", ", bench_op_name(op));
  return out + ", all";
}

std::vector<BenchOp> parse_ops(std::string_view list) {
  std::vector<BenchOp> ops;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (name == "all") {
      ops.assign(std::begin(kAllBenchOps), std::end(kAllBenchOps));
      continue;
    }
    auto it = std::find_if(std::begin(kAllBenchOps), std::end(kAllBenchOps),
                           [&](BenchOp op) { return bench_op_name(op) == name; });
    if (it == std::end(kAllBenchOps))
      throw UsageError(concat("--op: unknown collective \"", name, "\"; use one of: ", op_names(),
                              " (comma separated)"));
    ops.push_back(*it);
  }
  if (ops.empty()) throw UsageError(concat("--op: empty list; use one of: ", op_names()));
  return ops;
}

size_t parse_bytes(std::string_view option, std::string_view text) {
  size_t multiplier = 1;
  std::string_view digits = text;
  if (!digits.empty()) {
    char suffix = digits.back();
    if (suffix == 'K' || suffix == 'k') multiplier = size_t{1} << 10;
    if (suffix == 'M' || suffix == 'm') multiplier = size_t{1} << 20;
    if (suffix == 'G' || suffix == 'g') multiplier = size_t{1} << 30;
    if (multiplier != 1) digits.remove_suffix(1);
  }
  size_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      value > std::numeric_limits<size_t>::max() / multiplier)
    throw UsageError(
        concat(option, ": \"", text, "\" is not a byte count; write e.g. 4096, 64K, 64M or 1G"));
  return value * multiplier;
}

int parse_int(std::string_view option, std::string_view text, int min_value, int max_value) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min_value ||
      value > max_value)
    throw UsageError(
        concat(option, ": \"", text, "\" is not an integer in [", min_value, ", ", max_value, "]"));
  return value;
}

}  // namespace lockstep::cli::bench
