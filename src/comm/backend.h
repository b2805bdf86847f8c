// Backend: the engine that moves a group's bytes. One folder per backend under src/backends/, each
// with the same file names. The ProcessGroup front end (src/group) validates calls and orders
// them; a backend only executes ops, one at a time, on the group's progress thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/failure.h"
#include "comm/group_config.h"
#include "comm/op.h"
#include "comm/peer_links.h"
#include "lockstep/comm/shared_buffer.h"
#include "lockstep/core/deadline.h"

namespace lockstep {

class Backend {
 public:
  virtual ~Backend() = default;
  // "tcp", "shm", ...
  virtual const std::string& name() const = 0;
  // Argument problems this backend can see before it moves data (an MPI count above INT_MAX, a
  // tag above the MPI bound, a reduce op NCCL lacks, ...): throws InvalidArgument naming them.
  // Runs on the caller's thread before the op is queued, so the group stays usable. Default:
  // none beyond the front end's.
  virtual void check(const Op& /*op*/) const {}
  // Runs op to completion or throws (NetworkError, MismatchError, TimeoutError). Called from one
  // thread at a time, in issue order. op.deadline bounds every wait.
  virtual void run(const Op& op) = 0;
  // Runs on the caller's thread once op is accepted (checked and numbered), just before it is
  // queued: a backend that must capture the caller's state at issue time keeps it in
  // op.issued_state (nccl: an event on the caller's current CUDA stream, which orders the op
  // after the work that produced its data). Default: nothing.
  virtual void prepare(Op& /*op*/) {}
  // Whether op (a send or recv) must progress together with the sends and recvs queued next to
  // it: the progress queue then hands a run of such ops to run_p2p_group at once (nccl: ncclSend
  // and ncclRecv progress only when fused in one ncclGroupStart/ncclGroupEnd, so a ring of
  // one-by-one sends and recvs would deadlock). Default: no.
  virtual bool fuses_p2p(const Op& /*op*/) const { return false; }
  // Runs ops (each a send or recv for which fuses_p2p is true) as one group: they complete, or
  // fail, together. Default: one by one.
  virtual void run_p2p_group(std::span<const Op> ops) {
    for (const Op& op : ops) run(op);
  }
  // Whether op may run on the calling thread when nothing else is queued (small ops on a
  // low-latency backend: saves the hand-off to the progress thread). Default: never.
  virtual bool prefers_inline(const Op& /*op*/) const { return false; }
  // Why this backend cannot move buffers that live on `device` ("" when it can). The front end
  // turns a non-empty answer into InvalidArgument before queueing. Default: host memory only.
  virtual std::string device_problem(Device device) const;
  // Memory for ProcessGroup::allocate (call number `index`, the same on every rank; the front end
  // has checked that every rank asks for `bytes`). Collective over the group. May be called while
  // an op runs on the progress thread. Default: ordinary memory (SharedBuffer::local).
  virtual SharedBuffer allocate(size_t bytes, uint64_t index, Deadline deadline);
  // After a failure on this rank: tells the peers (so they fail fast with the cause) and makes
  // every later run() throw. Idempotent. `reason` is the original error's message.
  virtual void abort(const std::string& reason) = 0;
  // abort() for a failure of the given class, which started outside this backend (in a group
  // that runs some of its stages here): the peers raise it with that class (peer_class).
  // Default: abort(reason).
  virtual void abort_as(ErrorClass /*error_class*/, const std::string& reason) { abort(reason); }
  // Orderly goodbye at destruction: tells peers this rank is done and lingers up to the deadline
  // so that slower peers are not mistaken for dead ones.
  virtual void shutdown(Deadline deadline) = 0;
  // The ranks whose host this backend found unreachable (nothing acknowledged within
  // LOCKSTEP_LINK_TIMEOUT, or no route: a partition or a dead host), in no order. The group's
  // teardown sends them no goodbye of its own: a connection to them could only wait out its
  // linger. Any thread. Default: none.
  virtual std::vector<int> unreachable_ranks() const { return {}; }
  // The connections to the peers that the group's p2p channel shares (comm/peer_links.h), or
  // null where the channel makes its own. Default: null.
  virtual std::shared_ptr<PeerLinks> peer_links() const { return nullptr; }
};

// What the backends that own their peers' connections share: the group's identity (rank, size,
// host name resolved once) and the first failure. run() goes through guarded(), which fails at
// once on a broken group, and turns an error into one call of tell_peers with the error's class
// before rethrowing it; abort() does the same for a failure outside the backend.
class BackendBase : public Backend {
 public:
  const std::string& name() const final { return name_; }
  void abort(const std::string& reason) final { fail(ErrorClass::network, reason); }
  void abort_as(ErrorClass error_class, const std::string& reason) final {
    fail(error_class, reason);
  }

 protected:
  BackendBase(std::string name, const GroupConfig& config);

  // Tells the peers about this rank's first failure (abort frames, a record in shared memory, a
  // store note). Called once. Must not throw.
  virtual void tell_peers(ErrorClass error_class, const std::string& reason) = 0;

  // Runs body() for op, as described above. A send or recv on a backend that does not fuse p2p
  // is refused first (reject_p2p), without failing the group.
  template <class Body>
  void guarded(const Op& op, Body&& body) {
    if (is_p2p(op.kind) && !fuses_p2p(op)) reject_p2p(op, name_);
    failure_.throw_if_happened(op);
    try {
      body();
    } catch (const std::exception& e) {
      fail(error_class_of(e), e.what());
      throw;
    }
  }

  bool failed() const { return failure_.happened(); }
  const GroupConfig& config() const { return config_; }
  int rank() const { return config_.rank; }
  int size() const { return config_.size; }
  const std::string& host() const { return host_; }
  // Best effort: leaves the abort note (comm/failure.h) for this rank's failure in the store.
  void write_note(const std::string& reason) const;

 private:
  void fail(ErrorClass error_class, const std::string& reason);

  const std::string name_;
  const GroupConfig config_;
  const std::string host_;
  FirstFailure failure_;
};

// Bytes of op's buffers on this rank (count, counts and recv_counts, in elements of its dtype).
uint64_t payload_bytes(const Op& op);

// Ops that move at most this many bytes may run on the caller's thread ([Inline ops] in
// src/group/progress_queue.cc), on the backends that prefer it.
inline constexpr uint64_t kInlineBytes = 64 * 1024;
// The usual prefers_inline: a small op, and never a recv, which may wait for a peer that first
// needs this thread to do something else (an irecv, then a collective on another group the
// sender is in).
// `limit`: a backend's own bound, where its hand-off costs more than the default's.
bool small_enough_to_inline(const Op& op, uint64_t limit = kInlineBytes);

}  // namespace lockstep
