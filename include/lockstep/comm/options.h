// Options structs, one per collective. Use designated initialisers:
//   pg.all_reduce(view(grads), {.op = ReduceOp::avg, .timeout = 30s});
// A timeout of kGroupTimeout means the group's timeout (LOCKSTEP_TIMEOUT, default 300 s).
#pragma once

#include <chrono>
#include <cstdint>

#include "lockstep/core/reduce_op.h"

namespace lockstep {

inline constexpr std::chrono::milliseconds kGroupTimeout{-1};

// Where a backend offers a choice of algorithm. automatic picks by size (docs/algorithms.md).
enum class Algorithm : uint8_t { automatic, ring, recursive_doubling, tree, chain, direct };

struct BroadcastOptions {
  int root = 0;  // group rank whose buffer is sent
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
  Algorithm algorithm = Algorithm::automatic;  // tree, chain or automatic
};

struct AllReduceOptions {
  ReduceOp op = ReduceOp::sum;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
  Algorithm algorithm = Algorithm::automatic;  // ring, recursive_doubling or automatic
};

struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::sum;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct AllGatherOptions {
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

// gather, gather_v, scatter and scatter_v.
struct RootedOptions {
  int root = 0;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};
using GatherOptions = RootedOptions;
using ScatterOptions = RootedOptions;

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::sum;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct AllToAllOptions {
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

struct BarrierOptions {
  std::chrono::milliseconds timeout = kGroupTimeout;
};

// send and recv. A recv must name the tag the matching send used.
struct P2POptions {
  uint32_t tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
};

std::string_view algorithm_name(Algorithm a);

}  // namespace lockstep
