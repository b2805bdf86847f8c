// ShmBackend: runs each collective over the group's segment (collective.h), and turns a failure on
// this rank into an abort record in the segment, so that every peer fails fast with the root cause.
#include "backends/shm/backend.h"

#include <algorithm>

#include "backends/shm/collective.h"
#include "backends/shm/peers.h"
#include "backends/shm/segment.h"
#include "backends/shm/shared_alloc.h"
#include "backends/shm/sync.h"
#include "core/host_cores.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

using namespace shm;

class ShmBackend final : public HostStage {
 public:
  explicit ShmBackend(const GroupConfig& config)
      : HostStage("shm", config),
        segment_(Segment::attach({.group = config.name,
                                  .rank = config.rank,
                                  .size = config.size,
                                  .store = config.store.get(),
                                  .deadline = Deadline::after(config.timeout)})),
        peers_(segment_->view(), config.rank, host()),
        // The whole group is on this host; the job may have more ranks here.
        sync_(segment_->view(), peers_,
              detail::oversubscribed(std::max(config.local_world_size, config.size))),
        allocations_(config.name, config.rank, config.size, config.store.get()) {}

  ~ShmBackend() override { leave(); }

  // The small slots of the segment hold an inline op's data ([Inline ops]).
  static_assert(kInlineBytes <= kSmallSlotBytes);
  bool prefers_inline(const Op& op) const override { return small_enough_to_inline(op); }

  void run(const Op& op) override {
    guarded(op, [&] {
      sync_.check_abort(op);
      run_collective(op);
    });
  }

  void set_enclosing(const Op& op) override { sync_.set_enclosing(op); }

  SharedBuffer allocate(size_t bytes, uint64_t index, Deadline deadline) override {
    return allocations_.allocate(bytes, index, deadline);
  }

  // Nothing lingers: every op completed before its run() returned.
  void shutdown(Deadline /*deadline*/) override {
    if (failed()) return;
    leave();
  }

 private:
  void run_collective(const Op& op) {
    Collective x{.op = op,
                 .seg = segment_->view(),
                 .sync = sync_,
                 .reducer = reducer_,
                 .me = rank(),
                 .n = size(),
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
      case OpKind::send:
      case OpKind::recv:
        reject_p2p(op, name());
    }
  }

  void tell_peers(ErrorClass error_class, const std::string& reason) override {
    sync_.publish_abort(error_class, reason);
  }

  // Marks this rank departed (peers that still wait for it fail at once) and wakes them.
  void leave() {
    RankControl& mine = segment_->view().control(rank());
    if (mine.state.exchange(static_cast<uint32_t>(RankState::departed)) ==
        static_cast<uint32_t>(RankState::departed))
      return;
    sync_.wake_everyone();
  }

  std::unique_ptr<Segment> segment_;
  Peers peers_;
  Sync sync_;
  SharedAllocations allocations_;  // ProcessGroup::allocate's buffers
  Reducer reducer_;
  uint64_t collectives_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_shm_backend(const GroupConfig& config) {
  return std::make_unique<ShmBackend>(config);
}

std::unique_ptr<shm::HostStage> shm::make_host_stage(const GroupConfig& config) {
  return std::make_unique<ShmBackend>(config);
}

}  // namespace lockstep
