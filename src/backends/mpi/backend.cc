// MpiBackend: runs each collective on the group's communicator (the agreement blocks, then, unless
// the op travelled in them, one nonblocking MPI call), waits with the op's deadline, and turns a
// failure on this rank into an abort note in the store, so that peers waiting in MPI fail fast
// with the root cause instead of at their deadline. send and recv go through the group's p2p
// engine over the MPI channel (p2p_channel.h).
#include "backends/mpi/backend.h"
#include "backends/mpi/p2p_channel.h"

#include "backends/mpi/agreement.h"
#include "backends/mpi/block_exchange.h"
#include "backends/mpi/collectives.h"
#include "backends/mpi/communicator.h"
#include "backends/mpi/piggyback.h"
#include "backends/mpi/wait.h"
#include "core/host_cores.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

using namespace mpi;

class MpiBackend final : public BackendBase {
 public:
  explicit MpiBackend(const GroupConfig& config)
      : BackendBase("mpi", config),
        comm_(config),
        oversubscribed_(detail::oversubscribed(config.local_world_size)) {
    if (size() > 1 && size() <= kDirectRanks)
      blocks_ =
          std::make_unique<BlockExchange>(comm_.get(), rank(), size(), piggyback_capacity(size()));
  }

  void check(const Op& op) const override { check_counts(op); }

  void run(const Op& op) override {
    const WaitContext context{.op = &op,
                              .deadline = op.deadline,
                              .group = config().name,
                              .rank = rank(),
                              .store = config().store.get(),
                              .bytes = payload_bytes(op),
                              .oversubscribed = oversubscribed_};
    guarded(op, [&] { run_collective(op, context); });
  }

  // Like tcp: small ops skip the hand-off to the progress thread.
  bool prefers_inline(const Op& op) const override { return small_enough_to_inline(op); }

  // Nothing lingers: every collective completed before its run() returned.
  void shutdown(Deadline /*deadline*/) override {}

 private:
  void run_collective(const Op& op, const WaitContext& context) {
    if (!blocks_) {
      check_agreement(op, comm_.get(), size(), context);
    } else if (piggybacks(op, size())) {
      blocks_->run(op, write_contribution(op, rank(), blocks_->own_payload()), context);
      finish_from_blocks(op, *blocks_, rank(), size(), scratch_);
      return;
    } else {
      blocks_->run(op, 0, context);
      check_counts_pairs(op, comm_.get(), size(), context);
    }
    Started started = start_collective(op, comm_.get(), rank(), scratch_);
    wait_request(started.request, context, started.call);
    finish_collective(op, rank(), size());
  }

  // Peers waiting in MPI look for the store note (wait.h).
  void tell_peers(ErrorClass /*error_class*/, const std::string& reason) override {
    write_note(reason);
  }

  Communicator comm_;
  bool oversubscribed_;                    // [Waiting] in wait.h
  std::unique_ptr<BlockExchange> blocks_;  // groups of 2 to kDirectRanks ranks
  Scratch scratch_;
};

}  // namespace

// Its strong references pull in everything the core reaches through weak ones.
extern "C" void lockstep_link_mpi_backend() {
  [[maybe_unused]] volatile auto bootstrap = &mpi::open_bootstrap_store;
  [[maybe_unused]] volatile auto channel = &make_mpi_p2p_channel;
}

std::unique_ptr<Backend> make_mpi_backend(const GroupConfig& config) {
  return std::make_unique<MpiBackend>(config);
}

}  // namespace lockstep
