// TcpBackend: runs each op with run_collective over a TcpTransport, and turns a failure on this
// rank into abort frames (and a store note) so that every peer fails fast with the root cause.
#include "backends/tcp/backend.h"

#include "algorithms/algorithms.h"
#include "backends/tcp/group_transport.h"
#include "backends/tcp/peer_errors.h"
#include "backends/tcp/tcp_transport.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep {

namespace {

// Ops that move at most this much run inline (see prefers_inline).
constexpr uint64_t kInlineBytes = 64 * 1024;

// Bytes this rank sends or receives in op (roughly: for inlining decisions).
uint64_t bytes_moved(const Op& op) {
  const uint64_t es = element_size(op.dtype);
  switch (op.kind) {
    case OpKind::send:
    case OpKind::recv:
      return op.count * es;
    case OpKind::all_to_all: {
      uint64_t n = 0;
      for (size_t c : op.counts) n += c;
      return n * es;
    }
    default:
      return op.agreed_bytes();
  }
}

class TcpBackend final : public Backend {
 public:
  explicit TcpBackend(const GroupConfig& config)
      : config_(config),
        transport_(connect_group_transport(
            config, config.hostname.empty() ? net::hostname() : config.hostname)) {}

  const std::string& name() const override { return name_; }

  void run(const Op& op) override {
    failure_.throw_if_happened(op);
    try {
      transport_->begin_op(op);
      run_collective(*transport_, scratch_, op);
      transport_->end_op();
    } catch (const Error& e) {
      abort_with(error_class_of(e), e.what());
      throw;
    }
  }

  // Small ops run on the caller's thread: the hand-off to the progress thread costs more than a
  // small op on loopback. Never a recv: it may wait for a peer that first needs this thread to
  // do something else (an irecv, then a collective on another group the sender is in).
  bool prefers_inline(const Op& op) const override {
    if (op.kind == OpKind::recv) return false;
    return bytes_moved(op) <= kInlineBytes;
  }

  void abort(const std::string& reason) override { abort_with(ErrorClass::network, reason); }

  void shutdown(Deadline deadline) override {
    if (failure_.happened() || shut_down_) return;
    shut_down_ = true;
    transport_->goodbye(deadline);
  }

 private:
  void abort_with(ErrorClass error_class, const std::string& reason) {
    if (!failure_.record(error_class, reason)) return;
    // The note first: a peer that only sees our socket close looks there for the reason.
    if (config_.store)
      write_abort_note(*config_.store, config_.name, config_.rank,
                       config_.hostname.empty() ? net::hostname() : config_.hostname, reason);
    transport_->abort(error_class, reason);
  }

  const std::string name_ = "tcp";
  GroupConfig config_;
  std::unique_ptr<TcpTransport> transport_;
  Scratch scratch_;
  FirstFailure failure_;
  bool shut_down_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_tcp_backend(const GroupConfig& config) {
  return std::make_unique<TcpBackend>(config);
}

}  // namespace lockstep
