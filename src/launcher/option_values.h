// The values of `lockstep run`'s options (src/launcher/options.cc declares the options to CLI11;
// these convert the text of a value). Each throws UsageError naming the option and the value.
#pragma once

#include <chrono>
#include <set>
#include <string_view>

#include "launcher/options.h"

namespace lockstep::launcher {

// A whole number in [min, max].
int parse_int(std::string_view option, std::string_view text, int min, int max);

// A number of seconds ("30", "0.5"), in [0, 1e7].
std::chrono::milliseconds parse_seconds(std::string_view option, std::string_view text);

// --tee / --redirects: "3" (every local rank) or "0:3,1:2" (per local rank).
StreamSelection parse_selection(std::string_view option, std::string_view text);

// --local-ranks-filter: "R,R,...", at least one.
std::set<int> parse_rank_list(std::string_view option, std::string_view text);

// --nnodes N, or MIN:MAX (elastic): sets nnodes, nnodes_min, nnodes_max and elastic.
void parse_nnodes(LaunchOptions& o, std::string_view text);

}  // namespace lockstep::launcher
