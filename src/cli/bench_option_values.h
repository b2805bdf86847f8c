// The values of `lockstep bench`'s options (bench_options.cc declares the options to CLI11;
// these convert the text of a value). Each throws UsageError naming the option and the value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cli/bench_options.h"

namespace lockstep::cli::bench {

// "all_reduce, broadcast, ..., all": the names --op takes.
std::string op_names();

// --op: names of collectives, comma separated, or "all".
std::vector<BenchOp> parse_ops(std::string_view list);

// "4096", "64K", "64M", "1G" (binary multiples).
size_t parse_bytes(std::string_view option, std::string_view text);

// An integer in [min_value, max_value].
int parse_int(std::string_view option, std::string_view text, int min_value, int max_value);

}  // namespace lockstep::cli::bench
