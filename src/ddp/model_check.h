// The construction-time check that every rank wraps the same model (failure catalogue #10).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/group/process_group.h"

namespace lockstep::ddp {

// A parameter (or buffer) as the check compares it.
struct ParamShape {
  std::string name;            // "fc1.weight"; no tab or newline
  std::string dtype;           // the framework's name for it: "float", "double", ...
  std::vector<int64_t> shape;  // [out, in]
  bool operator==(const ParamShape&) const = default;
};

// "[10, 64]".
std::string shape_string(std::span<const int64_t> shape);

// Collective over `group`: every rank calls it with its own list, in registration order. Returns
// when all lists are equal. Otherwise throws MismatchError on every rank, naming the first
// position where any rank differs with each rank's name, shape and dtype there (or that the rank
// has no parameter there). `what` names the caller in the message ("DistributedDataParallel").
// Blocks for two small all_gathers, each within `timeout` (kGroupTimeout: the group's).
void verify_same_parameters(ProcessGroup& group, std::span<const ParamShape> params,
                            std::string_view what, std::chrono::milliseconds timeout);

}  // namespace lockstep::ddp
