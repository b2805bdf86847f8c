// The collective algorithms, one file each, written against Transport so that every backend that
// can move point-to-point messages reuses them. docs/algorithms.md says which one runs when.
//
// Contract of every algorithm function: collective over t's ranks (send/recv: over the pair);
// every rank calls the same function with an Op that agrees on the header fields (kind, seq,
// dtype, counts, root, reduce op), so every rank posts the same sequence of messages and each
// receive's header check is exact. `op` may differ from the transport's current op only in its
// buffers, dtype and reduce op (f32 accumulation of 16-bit types, avg as sum): messages always
// carry the current op's identity. Blocking: returns when this rank's part is done; all
// requests it posted have completed. Throws what Transport::wait throws.
#pragma once

#include <cstddef>
#include <memory>

#include "algorithms/transport.h"
#include "comm/op.h"

namespace lockstep {

// Reusable, 64-byte aligned memory for algorithms: receive segments, partial sums, f32 copies of
// 16-bit data. Owned by a backend, one per group. Not thread-safe.
class Scratch {
 public:
  // Slots in use: each caller layer takes its own so that nested calls never share memory.
  enum Slot { kRecv = 0, kWork = 1, kWideIn = 2, kWideOut = 3, kCopy = 4, kSlots = 5 };
  // At least `bytes` of memory for slot; earlier contents are lost when it grows.
  void* get(Slot slot, size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> blocks_[kSlots];
  size_t sizes_[kSlots] = {};
};

// Bytes per pipeline segment of the ring and chain algorithms.
inline constexpr size_t kSegmentBytes = 256 * 1024;
// Receive segments in flight in a ring reduce-scatter (each a kSegmentBytes scratch slot).
inline constexpr size_t kRingRecvWindow = 2;
// Segments of its first chunk a rank sends ahead in a ring reduce-scatter before it paces the
// rest, one per segment received (2 MiB): the bytes waiting in socket buffers stay few enough to
// be copied out while still in cache (docs/algorithms.md: 64 MiB all_reduce 52 -> 29 ms).
inline constexpr size_t kRingSendAhead = 8;
// all_reduce and reduce switch from latency-optimal to bandwidth-optimal algorithms at this many
// bytes (docs/algorithms.md has the measurements): kRingThresholdBytes for 2 ranks, where both
// send the buffer once; kWideRingThresholdBytes from kWideGroup ranks on, where recursive doubling
// sends more than the ring (4 ranks: twice the buffer against 1.5 times).
inline constexpr size_t kRingThresholdBytes = 1024 * 1024;
inline constexpr size_t kWideRingThresholdBytes = 256 * 1024;
inline constexpr int kWideGroup = 3;
// broadcast switches from the binomial tree to the pipelined chain here.
inline constexpr size_t kChainThresholdBytes = 1024 * 1024;

// Runs op (normal form, see group/op.h) on t with the algorithm its size and op.algorithm choose.
// Handles world size 1, zero counts, avg (sum, then divide) and f16/bf16 arithmetic reductions
// (accumulated in f32).
void run_collective(Transport& t, Scratch& scratch, const Op& op);

// The algorithm run_collective uses for an all_reduce / broadcast of op over `size` ranks.
// Throws InvalidArgument for a forced algorithm the op does not offer.
Algorithm choose_all_reduce(const Op& op, int size);
// Whether reductions of op over `size` ranks use the ring (else the latency-optimal algorithm).
bool ring_pays_off(const Op& op, int size);
Algorithm choose_broadcast(const Op& op);

// The algorithms. REQUIRES t.size() > 1 and (reductions) a dtype the reduce kernels accumulate
// directly (no f16/bf16 sum/prod/avg: run_collective widens those). avg is not handled here:
// pass the divisor through `average_divisor` where offered, or finish_average afterwards.
void all_reduce_ring(Transport& t, Scratch& scratch, const Op& op, int average_divisor);
void all_reduce_recursive_doubling(Transport& t, Scratch& scratch, const Op& op);
void broadcast_tree(Transport& t, const Op& op);
void broadcast_chain(Transport& t, const Op& op);
void reduce_tree(Transport& t, Scratch& scratch, const Op& op);
void reduce_ring(Transport& t, Scratch& scratch, const Op& op);
void all_gather_ring(Transport& t, const Op& op);
void gather_direct(Transport& t, const Op& op);
void scatter_direct(Transport& t, const Op& op);
void reduce_scatter_ring(Transport& t, Scratch& scratch, const Op& op, int average_divisor);
void all_to_all_pairwise(Transport& t, Scratch& scratch, const Op& op);
void barrier_dissemination(Transport& t, const Op& op);

}  // namespace lockstep
