// ProcessGroup: a set of ranks that run collectives together.
//
// Collective contract: every member calls the same collectives in the same order, with matching
// arguments (the same count, dtype, root and reduce op; for _v variants the same counts array).
// A rank that breaks this gets a MismatchError naming both ranks and both calls, never garbage,
// as soon as two calls that meet differ. (A rank that skips a call is met by its next one: if that
// one is identical, the two pair up, and the error comes at the first later call that differs,
// or as a TimeoutError.)
//
// Asynchrony: each call validates its arguments on the calling thread (throwing InvalidArgument
// before any communication, leaving the group usable), then queues the op and returns a Work.
// Ops run in issue order on the group's progress thread; a small one (up to 64 KiB, never a recv)
// with nothing queued before it runs on the calling thread instead, and the call blocks until its
// peers arrive. Buffers must stay valid and untouched until the Work completes: [The rule] in
// lockstep/comm/work.h says what a program may rely on either way.
//
// Failure: a peer that dies, closes its connection or disagrees about an op fails the op with
// NetworkError or MismatchError naming it. After such an error the group is broken: queued and
// later ops fail at once with an error that repeats the original cause.
//
// Thread-safety: calls may come from several threads, but all ranks must agree on the order, so
// in practice one thread issues the collectives of a group.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lockstep/comm/options.h"
#include "lockstep/comm/shared_buffer.h"
#include "lockstep/comm/work.h"
#include "lockstep/core/buffer.h"

namespace lockstep {

// What a group is made of (name, members, store, backend, timeout): internal, in
// src/comm/group_config.h. init_process_group() and new_group() fill it in.
struct GroupConfig;

// One send or recv of batch_isend_irecv: P2POp::send(view(x), 1), P2POp::recv(view(y), 1, tag).
struct P2POp {
  bool is_send = true;
  ConstBufferView input;  // a send's
  BufferView output;      // a recv's
  int peer = 0;
  uint32_t tag = 0;
  static P2POp send(ConstBufferView input, int dst, uint32_t tag = 0) {
    P2POp op;
    op.input = input;
    op.peer = dst;
    op.tag = tag;
    return op;
  }
  static P2POp recv(BufferView output, int src, uint32_t tag = 0) {
    P2POp op;
    op.is_send = false;
    op.output = output;
    op.peer = src;
    op.tag = tag;
    return op;
  }
};

struct NewGroupOptions {
  std::string backend{};  // empty: the parent's backend
  std::chrono::milliseconds timeout = kGroupTimeout;
};

class ProcessGroup {
 public:
  // Connects to every member through the config's store. Collective over the members. Made by
  // init_process_group() and new_group().
  explicit ProcessGroup(const GroupConfig& config);
  // Waits for queued ops to finish (each within its own deadline), then says goodbye to the peers.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  // Unique in the job: "default", "default/1", ...
  const std::string& name() const;
  // The backend in use ("tcp", "shm", ...), never "auto".
  const std::string& backend_name() const;
  // Each member's rank in the default group (member i's at index i).
  const std::vector<int>& global_ranks() const;
  // The internal wiring (src/comm/group_config.h).
  const GroupConfig& config() const;

  // Sends root's buffer to every rank's buffer.
  [[nodiscard]] WorkPtr broadcast(BufferView buffer, const BroadcastOptions& options = {});
  // Reduces every rank's buffer elementwise; every rank gets the result (in place).
  [[nodiscard]] WorkPtr all_reduce(BufferView buffer, const AllReduceOptions& options = {});
  // Out of place: output gets the reduction of every rank's input; input is untouched.
  [[nodiscard]] WorkPtr all_reduce(ConstBufferView input, BufferView output,
                                   const AllReduceOptions& options = {});
  // Like all_reduce, but only root's output gets the result. Non-root outputs are untouched
  // (and may be empty views). In place: pass the same buffer twice.
  [[nodiscard]] WorkPtr reduce(ConstBufferView input, BufferView output,
                               const ReduceOptions& options = {});
  // output = concatenation of every rank's input, in rank order; output.count = size * input.count.
  // In place: input may be this rank's slot of output.
  [[nodiscard]] WorkPtr all_gather(ConstBufferView input, BufferView output,
                                   const AllGatherOptions& options = {});
  // Uneven all_gather: counts[r] elements from rank r; input.count == counts[rank];
  // output.count == sum(counts).
  [[nodiscard]] WorkPtr all_gather_v(ConstBufferView input, BufferView output,
                                     std::span<const size_t> counts,
                                     const AllGatherOptions& options = {});
  // root's output = concatenation of every rank's input. Non-root outputs are ignored.
  [[nodiscard]] WorkPtr gather(ConstBufferView input, BufferView output,
                               const GatherOptions& options = {});
  [[nodiscard]] WorkPtr gather_v(ConstBufferView input, BufferView output,
                                 std::span<const size_t> counts, const GatherOptions& options = {});
  // Rank r's output = slot r of root's input. Non-root inputs are ignored.
  [[nodiscard]] WorkPtr scatter(ConstBufferView input, BufferView output,
                                const ScatterOptions& options = {});
  [[nodiscard]] WorkPtr scatter_v(ConstBufferView input, BufferView output,
                                  std::span<const size_t> counts,
                                  const ScatterOptions& options = {});
  // Reduces every rank's input (size * output.count elements); rank r's output gets slot r.
  [[nodiscard]] WorkPtr reduce_scatter(ConstBufferView input, BufferView output,
                                       const ReduceScatterOptions& options = {});
  // Uneven: input.count == sum(counts); output.count == counts[rank].
  [[nodiscard]] WorkPtr reduce_scatter_v(ConstBufferView input, BufferView output,
                                         std::span<const size_t> counts,
                                         const ReduceScatterOptions& options = {});
  // Slot j of rank i's input goes to slot i of rank j's output. Both are size * k elements.
  [[nodiscard]] WorkPtr all_to_all(ConstBufferView input, BufferView output,
                                   const AllToAllOptions& options = {});
  // send_counts[j] elements go to rank j; recv_counts[i] come from rank i. Every pair must agree:
  // rank i's send_counts[j] == rank j's recv_counts[i].
  [[nodiscard]] WorkPtr all_to_all_v(ConstBufferView input, std::span<const size_t> send_counts,
                                     BufferView output, std::span<const size_t> recv_counts,
                                     const AllToAllOptions& options = {});
  // Completes once every rank has entered it.
  [[nodiscard]] WorkPtr barrier(const BarrierOptions& options = {});
  // Blocks until every rank has called it, or throws TimeoutError naming every rank that did not
  // arrive within timeout (kGroupTimeout: the group's timeout). Collective. It goes through the
  // store, not the data path, and does not wait for queued ops: call it where every rank should
  // be, to find the ones that are not. Rank 0 collects the arrivals and hands every rank the same
  // verdict; if rank 0 itself is missing, the others name every rank they did not see.
  void monitored_barrier(std::chrono::milliseconds timeout = kGroupTimeout);
  // Point to point ([Independent progress] in docs/collectives.md). Every call starts its message
  // at once and returns; the Work completes when the message is sent (its buffer may be reused)
  // or received. Pending sends and recvs never block each other, nor the group's collectives:
  // post a recv, then a send, then wait for both. A message matches the first recv posted for
  // its source (or for any source) and tag; messages of one pair with one tag arrive in the
  // order they were sent. A matched send and recv must agree on count and dtype (MismatchError
  // on both sides, naming both). `->wait()` makes any of them blocking (torch's send/recv).
  // Not collective.
  [[nodiscard]] WorkPtr send(ConstBufferView input, int dst, const P2POptions& options = {});
  [[nodiscard]] WorkPtr recv(BufferView output, int src, const P2POptions& options = {});
  // The same as send and recv (the names torch.distributed uses for the non-blocking forms).
  [[nodiscard]] WorkPtr isend(ConstBufferView input, int dst, const P2POptions& options = {});
  [[nodiscard]] WorkPtr irecv(BufferView output, int src, const P2POptions& options = {});
  // A recv from whichever rank sends first with this tag; the Work's source_rank() tells which.
  [[nodiscard]] WorkPtr recv_any(BufferView output, const P2POptions& options = {});
  // Starts every send and recv of `ops` together and completes them as one Work (torch's
  // batch_isend_irecv), with the first error. `timeout`: kGroupTimeout is the group's.
  [[nodiscard]] WorkPtr batch_isend_irecv(std::span<const P2POp> ops,
                                          std::chrono::milliseconds timeout = kGroupTimeout);

  // `bytes` of memory for this rank's collective buffers that the group's peers can reach directly
  // where the backend allows (shm: a shared-memory segment every rank maps; large collectives
  // whose buffers all lie in such memory run without copies through the group's segment), and
  // ordinary memory elsewhere. Collective: every rank calls it, the same number of times, in the
  // same order, with the same size; a rank that asks for another size gets MismatchError (on
  // every rank, naming each rank's size), one that never calls a TimeoutError naming it. Zeroed,
  // page-aligned. Freeing (dropping the last copy of the handle) is local to this rank.
  SharedBuffer allocate(size_t bytes, std::chrono::milliseconds timeout = kGroupTimeout);

  // A subgroup of `ranks` (ranks of this group, distinct, any order). Member i of the subgroup is
  // the i-th smallest of them. Collective over this whole group: every rank calls it, in the same
  // order relative to other new_group calls, with the same ranks. Returns null on non-members.
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks,
                                          const NewGroupOptions& options = {});

 private:
  struct Impl;  // src/group/process_group_impl.h
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
