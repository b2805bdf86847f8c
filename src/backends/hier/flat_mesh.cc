#include "backends/hier/flat_mesh.h"

#include "backends/tcp/mesh.h"
#include "backends/tcp/peer_errors.h"
#include "net/socket.h"

namespace lockstep::hier {

namespace {

// SO_SNDBUF/SO_RCVBUF of every data socket, as on the tcp backend.
constexpr int kSocketBufferBytes = 4 * 1024 * 1024;

}  // namespace

FlatMesh::FlatMesh(const GroupConfig& config)
    : config_(config), host_(config.hostname.empty() ? net::hostname() : config.hostname) {
  auto conns = connect_mesh({.group = config.name,
                             .rank = config.rank,
                             .size = config.size,
                             .store = config.store,
                             .advertise_address = config.advertise_address,
                             .hostname = host_,
                             .socket_buffer_bytes = kSocketBufferBytes,
                             .deadline = Deadline::after(config.timeout)});
  TransportIdentity identity{.group = config.name,
                             .rank = config.rank,
                             .size = config.size,
                             .hostname = host_,
                             .store = config.store};
  transport_ = std::make_unique<TcpTransport>(std::move(conns), std::move(identity));
}

void FlatMesh::run(const Op& op) {
  with_op(op, [&](Transport& t, Scratch& s) { run_collective(t, s, op); });
}

void FlatMesh::abort(ErrorClass error_class, const std::string& reason) {
  // The note first: a peer that only sees our socket close looks there for the reason.
  if (config_.store) write_abort_note(*config_.store, config_.name, config_.rank, host_, reason);
  transport_->abort(error_class, reason);
}

}  // namespace lockstep::hier
