// TcpBackend: runs each op with run_collective over a TcpTransport, and turns a failure on this
// rank into abort frames (and a store note) so that every peer fails fast with the root cause.
#include "backends/tcp/backend.h"

#include "algorithms/algorithms.h"
#include "backends/tcp/group_transport.h"
#include "backends/tcp/tcp_transport.h"

namespace lockstep::tcp {

namespace {

constexpr uint64_t kTcpInlineBytes = 512 * 1024;

class TcpBackend final : public BackendBase {
 public:
  explicit TcpBackend(const GroupConfig& config)
      : BackendBase("tcp", config), transport_(connect_group_transport(config, host())) {}

  void run(const Op& op) override {
    guarded(op, [&] {
      transport_->begin_op(op);
      run_collective(*transport_, scratch_, op);
      transport_->finish_op();
    });
  }

  // Small ops run on the caller's thread: the hand-off to the progress thread (two thread wake-ups,
  // 30-140 us on a small VM) costs more than a small op on loopback. Up to kTcpInlineBytes, not
  // the 64 KiB of the other backends: a 128 KiB all_reduce took 68-182 us through the progress
  // thread, against 40 us for 64 KiB inline (docs/algorithms.md).
  bool prefers_inline(const Op& op) const override {
    return small_enough_to_inline(op, kTcpInlineBytes);
  }

  void shutdown(Deadline deadline) override {
    if (failed() || shut_down_) return;
    shut_down_ = true;
    transport_->goodbye(deadline);
  }

  std::vector<int> unreachable_ranks() const override { return transport_->unreachable_ranks(); }
  std::shared_ptr<PeerLinks> peer_links() const override { return transport_->links(); }

 private:
  void tell_peers(ErrorClass error_class, const std::string& reason) override {
    // The note first: a peer that only sees our socket close looks there for the reason.
    write_note(reason);
    transport_->abort(error_class, reason);
  }

  std::unique_ptr<TcpTransport> transport_;
  Scratch scratch_;
  bool shut_down_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_tcp_backend(const GroupConfig& config) {
  return std::make_unique<TcpBackend>(config);
}

}  // namespace lockstep::tcp
