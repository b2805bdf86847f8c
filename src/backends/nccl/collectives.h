// How each Op becomes NCCL calls on the communicator's stream. Enqueues only: the caller waits
// (Communicator::wait).
//
// - broadcast, all_reduce, reduce, all_gather, reduce_scatter: the NCCL collective of that name.
// - all_gather_v: one ncclBroadcast per rank (root r sends its counts[r] elements), grouped.
// - reduce_scatter_v: one ncclReduce per rank (root r gets its counts[r] elements), grouped.
// - gather, scatter (and _v), all_to_all (and _v): ncclSend/ncclRecv per peer, grouped; a rank's
//   own slot is a device-to-device copy on the stream.
// - barrier: an ncclAllReduce of one int in the communicator's scratch.
// - send, recv: ncclSend, ncclRecv; runs of them in one group (enqueue_p2p_group).
// Grouped calls sit in a GroupScope, which ends the group if a call fails.
#pragma once

#include <span>

#include "backends/nccl/communicator.h"
#include "comm/op.h"

namespace lockstep::nccl {

// Throws InvalidArgument for a reduce op that NCCL lacks (band, bor, bxor), before any call.
void enqueue_op(Communicator& comm, const Op& op, int rank);
// Sends and recvs (ops of kind send or recv only) in one ncclGroupStart/ncclGroupEnd, so that
// they progress together: a ring, or a pair that both receive first, cannot deadlock.
void enqueue_p2p_group(Communicator& comm, std::span<const Op> ops);
// That check alone (the backend's check(), on the caller's thread).
void check_reduce_op(const Op& op);

}  // namespace lockstep::nccl
