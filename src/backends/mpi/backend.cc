// MpiBackend: runs each op on the group's communicator (collectives: one nonblocking MPI call
// after the agreement check; send/recv: p2p.h), waits with the op's deadline, and turns a failure
// on this rank into an abort note in the store, so that peers waiting in MPI fail fast with the
// root cause instead of at their deadline.
#include "backends/mpi/backend.h"

#include "backends/mpi/agreement.h"
#include "backends/mpi/collectives.h"
#include "backends/mpi/communicator.h"
#include "backends/mpi/p2p.h"
#include "backends/mpi/wait.h"
#include "backends/tcp/peer_errors.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep {

namespace {

using namespace mpi;

// Ops that move at most this much run on the caller's thread when the queue is idle.
constexpr uint64_t kInlineBytes = 64 * 1024;

uint64_t payload_bytes(const Op& op) {
  uint64_t elements = op.count;
  for (size_t c : op.counts) elements += c;
  for (size_t c : op.recv_counts) elements += c;
  return elements * element_size(op.dtype);
}

class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(const GroupConfig& config)
      : config_(config),
        host_(config.hostname.empty() ? net::hostname() : config.hostname),
        comm_(config),
        p2p_(comm_.get()) {}

  const std::string& name() const override { return name_; }

  void run(const Op& op) override {
    failure_.throw_if_happened(op);
    const WaitContext context{.what = op.describe(),
                              .deadline = op.deadline,
                              .group = config_.name,
                              .rank = config_.rank,
                              .store = config_.store.get(),
                              .bytes = payload_bytes(op)};
    try {
      if (op.kind == OpKind::send) {
        p2p_.send(op, context);
      } else if (op.kind == OpKind::recv) {
        p2p_.recv(op, context);
      } else {
        p2p_.reap(context);
        run_collective(op, context);
      }
    } catch (const Error& e) {
      abort_with(error_class_of(e), e.what());
      throw;
    }
  }

  // Like tcp: small ops skip the hand-off to the progress thread. Never a recv, which may wait
  // for a peer that first needs this thread elsewhere.
  bool prefers_inline(const Op& op) const override {
    return op.kind != OpKind::recv && payload_bytes(op) <= kInlineBytes;
  }

  void abort(const std::string& reason) override { abort_with(ErrorClass::network, reason); }

  void shutdown(Deadline deadline) override {
    if (!failure_.happened()) p2p_.drain(deadline);
  }

 private:
  void run_collective(const Op& op, const WaitContext& context) {
    check_agreement(op, comm_.get(), config_.size, context);
    Started started = start_collective(op, comm_.get(), config_.rank, scratch_);
    wait_request(started.request, context, started.call);
    finish_collective(op, config_.rank, config_.size);
  }

  void abort_with(ErrorClass error_class, const std::string& reason) {
    if (!failure_.record(error_class, reason)) return;
    if (config_.store) write_abort_note(*config_.store, config_.name, config_.rank, host_, reason);
  }

  const std::string name_ = "mpi";
  GroupConfig config_;
  std::string host_;
  Communicator comm_;
  PointToPoint p2p_;
  Scratch scratch_;
  FirstFailure failure_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const GroupConfig& config) {
  return std::make_unique<MpiBackend>(config);
}

}  // namespace lockstep
