// Op: one validated collective or point-to-point call, as the progress thread runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/comm/options.h"
#include "lockstep/core/buffer.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep {

enum class OpKind : uint8_t {
  broadcast,
  all_reduce,
  reduce,
  all_gather,
  gather,
  scatter,
  reduce_scatter,
  all_to_all,
  barrier,
  send,
  recv
};
std::string_view op_kind_name(OpKind kind);
inline bool is_p2p(OpKind kind) {
  return kind == OpKind::send || kind == OpKind::recv;
}

// Collectives that a layer runs beside an op under the op's number (the LOCKSTEP_DEBUG=DETAIL
// fingerprint exchange) carry this tag; user collectives carry 0. Checks that compare the kinds
// of ops with one number leave tagged ones alone.
inline constexpr uint32_t kSideExchangeTag = 0x51de;

// "rank 1 is in broadcast #0 while rank 0 is in all_reduce #0: the ranks called collectives in a
// different order. Fix: ...": the one wording of an order mismatch, whichever check finds it.
std::string order_mismatch_text(int peer, std::string_view theirs, int rank, std::string_view mine);

// LOCKSTEP_DEBUG=DETAIL (src/debug/issue_order.h): how many collectives the issuing thread had
// issued on another group, one that shares at least two ranks with the op's group, before the op.
struct PriorIssue {
  std::string group;  // the other group's name ("default/1")
  uint64_t count = 0;
  bool operator==(const PriorIssue&) const = default;
};

// Normal form, so that algorithms handle one shape per kind:
// - all_reduce, broadcast, reduce: input/output hold `count` elements each (in place: same
//   pointer). reduce: output is only meaningful on root.
// - all_gather, gather, scatter, reduce_scatter: `counts` has one entry per rank (uniform calls
//   fill it with equal values); `variable` tells whether the user called the _v form.
// - all_to_all: counts = elements sent to each rank, recv_counts = received from each rank.
// - send/recv: peer = the other rank, count elements.
struct Op {
  OpKind kind = OpKind::barrier;
  bool variable = false;
  uint64_t seq = 0;  // collectives: the group's sequence number; send/recv: per pair and direction
  DType dtype = DType::f32;
  ReduceOp reduce_op = ReduceOp::sum;
  int root = 0;   // broadcast/reduce/gather/scatter
  int peer = -1;  // send/recv
  uint32_t tag = 0;
  Algorithm algorithm = Algorithm::automatic;
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // all_reduce/broadcast/reduce/send/recv element count
  std::vector<size_t> counts;
  std::vector<size_t> recv_counts;
  Deadline deadline{Clock::now()};
  uint64_t record_id = 0;  // the flight recorder's id for this op (src/debug/flight_recorder.h)
  Device device{};  // where this rank's buffers live (the front end checks input and output agree)
  std::vector<PriorIssue> prior_issues;  // LOCKSTEP_DEBUG=DETAIL collectives only, else empty
  // What Backend::prepare captured on the caller's thread when the op was issued, for run() on
  // the progress thread (nccl: a CUDA event on the caller's current stream). Opaque here, so
  // that the core knows nothing of CUDA; null for most backends.
  std::shared_ptr<void> issued_state;

  // Bytes that every rank must agree on (the header check): count*size for all_reduce-like ops,
  // the per-rank count for uniform gathers, the total for _v forms; 0 for all_to_all and p2p.
  uint64_t agreed_bytes() const;
  // A checksum of counts (0 when not variable), so ranks that disagree on a _v counts array fail.
  uint32_t counts_checksum() const;
  // "all_reduce #12", "send #3 to rank 2".
  std::string name() const;
  // "all_reduce #12 (f32 x 1000, sum)".
  std::string describe() const;
};

// A send or recv reached a backend's run(): only backends that fuse p2p (Backend::fuses_p2p,
// nccl) run them there; the group hands every other one to its p2p engine (src/p2p/engine.h).
// Throws InvalidArgument naming the op and `where` (the backend or transport).
[[noreturn]] void reject_p2p(const Op& op, std::string_view where);

}  // namespace lockstep
