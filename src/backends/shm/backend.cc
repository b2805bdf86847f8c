// ShmBackend: runs each op over the group's segment (collectives: collective.h; send/recv:
// mailbox.h), and turns a failure on this rank into an abort record in the segment, so that every
// peer fails fast with the root cause.
#include "backends/shm/backend.h"

#include "backends/shm/collective.h"
#include "backends/shm/mailbox.h"
#include "backends/shm/peers.h"
#include "backends/shm/segment.h"
#include "backends/shm/shared_alloc.h"
#include "backends/shm/sync.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep {

namespace {

using namespace shm;

// Ops up to this many bytes run on the caller's thread when the queue is idle ([Inline ops]).
constexpr uint64_t kInlineBytes = kSmallSlotBytes;

// shm runs one algorithm per op; the tcp choices are accepted (and ignored) so that code written
// for tcp runs unchanged, and the same choices are rejected.
void check_algorithm(const Op& op) {
  const Algorithm a = op.algorithm;
  if (a == Algorithm::automatic) return;
  if (op.kind == OpKind::all_reduce)
    LOCKSTEP_ENFORCE(a == Algorithm::ring || a == Algorithm::recursive_doubling, InvalidArgument,
                     op.name(), ": all_reduce runs ring, recursive_doubling or automatic, not ",
                     algorithm_name(a));
  if (op.kind == OpKind::broadcast)
    LOCKSTEP_ENFORCE(a == Algorithm::tree || a == Algorithm::chain, InvalidArgument, op.name(),
                     ": broadcast runs tree, chain or automatic, not ", algorithm_name(a));
}

uint64_t payload_bytes(const Op& op) {
  const uint64_t es = element_size(op.dtype);
  uint64_t elements = op.count;
  for (size_t c : op.counts) elements += c;
  for (size_t c : op.recv_counts) elements += c;
  return elements * es;
}

class ShmBackend final : public Backend {
 public:
  explicit ShmBackend(const GroupConfig& config)
      : config_(config),
        segment_(Segment::attach({.group = config.name,
                                  .rank = config.rank,
                                  .size = config.size,
                                  .store = config.store.get(),
                                  .deadline = Deadline::after(config.timeout)})),
        peers_(segment_->view(), config.rank,
               config.hostname.empty() ? net::hostname() : config.hostname),
        sync_(segment_->view(), peers_),
        mailboxes_(segment_->view(), sync_),
        allocations_(config.name, config.rank, config.size, config.store.get()) {}

  ~ShmBackend() override { leave(); }

  const std::string& name() const override { return name_; }

  bool prefers_inline(const Op& op) const override {
    return op.kind != OpKind::recv && payload_bytes(op) <= kInlineBytes;
  }

  void run(const Op& op) override {
    failure_.throw_if_happened(op);
    try {
      sync_.check_abort(op);
      mailboxes_.rethrow_failure(op);
      check_algorithm(op);
      if (op.kind == OpKind::send) return mailboxes_.send(op);
      if (op.kind == OpKind::recv) return mailboxes_.recv(op);
      run_collective(op);
    } catch (const Error& e) {
      abort_with(error_class_of(e), e.what());
      throw;
    }
  }

  SharedBuffer allocate(size_t bytes, uint64_t index, Deadline deadline) override {
    return allocations_.allocate(bytes, index, deadline);
  }

  void abort(const std::string& reason) override { abort_with(ErrorClass::network, reason); }

  void shutdown(Deadline deadline) override {
    if (failure_.happened()) return;
    mailboxes_.drain(deadline);  // sends staged for slow receivers
    leave();
  }

 private:
  void run_collective(const Op& op) {
    Collective x{.op = op,
                 .seg = segment_->view(),
                 .sync = sync_,
                 .reducer = reducer_,
                 .me = config_.rank,
                 .n = config_.size,
                 .parity = static_cast<int>(collectives_ % 2),
                 .base = sync_.step(),
                 .es = element_size(op.dtype),
                 .allocations = &allocations_};
    ++collectives_;
    switch (op.kind) {
      case OpKind::all_reduce:
      case OpKind::reduce:
        return run_all_reduce(x);
      case OpKind::reduce_scatter:
        return run_reduce_scatter(x);
      case OpKind::broadcast:
        return run_broadcast(x);
      case OpKind::all_gather:
      case OpKind::gather:
        return run_gather(x);
      case OpKind::scatter:
        return run_scatter(x);
      case OpKind::all_to_all:
        return run_all_to_all(x);
      case OpKind::barrier:
        arrive(x, 0, true);
        return;
      default:
        throw InvalidArgument(op.name() + ": not a collective");
    }
  }

  void abort_with(ErrorClass error_class, const std::string& reason) {
    if (!failure_.record(error_class, reason)) return;
    mailboxes_.abandon();
    sync_.publish_abort(error_class, reason);
  }

  // Marks this rank departed (peers that still wait for it fail at once) and wakes them.
  void leave() {
    RankControl& mine = segment_->view().control(config_.rank);
    if (mine.state.exchange(static_cast<uint32_t>(RankState::departed)) ==
        static_cast<uint32_t>(RankState::departed))
      return;
    sync_.wake_everyone();
  }

  const std::string name_ = "shm";
  GroupConfig config_;
  std::unique_ptr<Segment> segment_;
  Peers peers_;
  Sync sync_;
  Mailboxes mailboxes_;
  SharedAllocations allocations_;  // ProcessGroup::allocate's buffers
  Reducer reducer_;
  uint64_t collectives_ = 0;
  FirstFailure failure_;
};

}  // namespace

std::unique_ptr<Backend> make_shm_backend(const GroupConfig& config) {
  return std::make_unique<ShmBackend>(config);
}

}  // namespace lockstep
