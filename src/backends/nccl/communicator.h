// Communicator: one NCCL communicator and its CUDA stream, for one group on one device.
//
// [Init] Collective over the group, bounded by a deadline. Every rank publishes a DeviceClaim
// (host, device index, PCI bus id) in the store and reads everyone's; ranks on one host that
// picked one GPU fail here (core/device_check.h). Rank 0 then creates the NCCL unique id and sets
// it in the store; the others get it. Keys live under "<group>/nccl/<n>/", n counting this
// rank's inits of the group's name, so a later init of the same name never reads an earlier
// one's unique id. A rank whose init fails leaves an abort note first (rank 0's
// ncclGetUniqueId included), so that the others stop waiting for it at once: they look for the
// note while they wait for the id and for NCCL.
//
// [Blocking mode] Blocking by default, as PyTorch; LOCKSTEP_NCCL_NONBLOCKING=1 creates it
// non-blocking, so that init, ncclGroupEnd and finalize return ncclInProgress and every wait is
// ours, bounded by the deadline. In blocking mode an op's NCCL calls and finalize run under a
// BlockingWatch (blocking_watch.h), which aborts the communicator from its own thread at the
// deadline, on another rank's abort note or on a dead peer; init is bounded by NCCL's own
// bootstrap timeouts, once every rank has shown it reached init (the claims above). Waits on the
// stream are ours in both modes.
//
// [Waiting] An op's NCCL calls are enqueued on the stream; wait() then polls cudaStreamQuery and
// ncclCommGetAsyncError (spinning briefly, then sleeping), and every 100 ms the store's abort
// note and the processes of the ranks on this host (peer_watch.h). On an NCCL or CUDA error,
// another rank's abort note, a peer's exit, or the deadline, it aborts the communicator
// (ncclCommAbort), so that a dead peer never hangs this rank, and throws an error naming the op
// and the rank.
//
// [Abort] ncclCommAbort inside an open ncclGroupStart only queues the reclaim, so abort() first
// ends every group that GroupScope opened. Then it waits, at most kIdleBound, for the stream to
// go idle: the op's Work completes only after that, so that the GPU no longer writes the
// caller's buffers (a warning says so when the bound passes first).
//
// Thread-safety: one thread at a time (the group's progress thread, or the constructor's).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/nccl/blocking_watch.h"
#include "backends/nccl/peer_watch.h"
#include "comm/group_config.h"
#include "lockstep/core/deadline.h"

namespace lockstep::nccl {

// How long abort() waits for the stream to go idle ([Abort]).
inline constexpr std::chrono::seconds kIdleBound{10};

class GroupScope;

class Communicator {
 public:
  // Makes device current on the calling thread and creates the communicator. Collective; throws
  // ConfigError for duplicate devices, TimeoutError naming the ranks that never joined, Error for
  // CUDA or NCCL failures.
  Communicator(const GroupConfig& config, int device, Deadline deadline);
  // Finalizes (or, after an abort, only releases) the communicator, then the stream.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  // 4 bytes of device memory for barriers.
  int* scratch() const { return scratch_; }
  // The watch to arm around calls that may wait inside NCCL; null for a non-blocking
  // communicator ([Blocking mode]).
  BlockingWatch* blocking_watch() const { return watch_.get(); }

  // Waits for an NCCL call's result in non-blocking mode: ncclInProgress settles through
  // ncclCommGetAsyncError. Throws (after aborting) on an error or at the deadline.
  void settle(ncclResult_t result, std::string_view call, std::string_view op, Deadline deadline);
  // Blocks until everything enqueued on the stream has finished. Throws as described above.
  void wait(std::string_view op, Deadline deadline);
  // Ends open groups, ncclCommAbort, then waits (bounded) for the stream ([Abort]). Once; later
  // calls do nothing.
  void abort();
  bool aborted() const { return aborted_; }
  // Flushes outstanding work (ncclCommFinalize), waiting at most until deadline.
  void finalize(Deadline deadline);

 private:
  friend class GroupScope;
  // Gets keys from the store; nothing at the deadline. Looks for another rank's abort note every
  // 100 ms meanwhile: NetworkError with the note, naming what this rank was waiting_for.
  std::optional<std::vector<std::string>> get_or_note(const std::vector<std::string>& keys,
                                                      Deadline deadline,
                                                      std::string_view waiting_for);
  void exchange_claims(Deadline deadline);
  ncclUniqueId exchange_unique_id(Deadline deadline);
  // "all_reduce #3 on rank 1 (nccl, cuda:1)".
  std::string where(std::string_view op) const;
  [[noreturn]] void fail_nccl(ncclResult_t result, std::string_view call, std::string_view op);
  [[noreturn]] void fail_timeout(std::string_view op);
  // Frees the communicator (destroy after finalize, else abort), the scratch and the stream.
  void release();
  // Throws NetworkError if another rank left an abort note in the store, or a rank on this host
  // exited. Looks at most every 100 ms.
  void check_peers(std::string_view op);
  // What check_peers looks at, as text ("the group was aborted by ..."); nothing when all is
  // well. Safe from the watch's thread.
  std::optional<std::string> peer_problem() const;
  // After the watch aborted the communicator: ends open groups, waits for the stream, and
  // throws the watch's reason (TimeoutError at the deadline, else NetworkError).
  [[noreturn]] void fail_watched(std::string_view op, const std::string& reason);
  // The end of abort(): waits, bounded, for the stream to go idle.
  void drain_stream();

  GroupConfig config_;
  std::string prefix_;  // "<group>/nccl/<n>/" ([Init])
  int device_;
  std::string host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int* scratch_ = nullptr;
  std::unique_ptr<PeerWatch> peers_;
  bool pooled_ = false;                   // scratch_ comes from the stream-ordered allocator
  int open_groups_ = 0;                   // GroupScopes not yet ended
  std::mutex abort_mu_;                   // the watch's abort against abort()
  bool watch_aborted_ = false;            // under abort_mu_: the watch called ncclCommAbort
  std::unique_ptr<BlockingWatch> watch_;  // blocking communicators only
  bool aborted_ = false;
  bool finalized_ = false;
  Clock::time_point next_note_check_{};
  Clock::time_point began_{};  // when the current wait started, for messages
};

// One ncclGroupStart/ncclGroupEnd around an op's NCCL calls. end() ends it; an exception that
// unwinds past an open scope ends it in the destructor, unless abort() already has ([Abort]).
class GroupScope {
 public:
  GroupScope(Communicator& comm, std::string_view op, Deadline deadline);
  ~GroupScope();
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;
  // ncclGroupEnd, settled as any NCCL call.
  void end();

 private:
  Communicator& comm_;
  std::string op_;
  Deadline deadline_;
  int depth_;  // comm_.open_groups_ once this scope was open
};

}  // namespace lockstep::nccl
