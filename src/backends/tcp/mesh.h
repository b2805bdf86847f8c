// Mesh: the full set of connections of one rank, one socket per pair of ranks.
//
// Each rank listens on an ephemeral port (on its advertise address when it can, else on every
// interface; LOCKSTEP_BIND_ADDR overrides) and publishes its ListenerRecord for the mesh service
// (src/net/listener_record.h). It then connects to every lower rank and accepts every higher one,
// with the data plane's one opening (src/net/handshake.h): the connector's hello and, with a
// secret, its proof for the listener's challenge; the acceptor answers with a verdict and its own
// hello. A
// connection whose hello is anything else (a port scanner, another group, a stale process), or
// whose proof fails, is closed and logged (at INFO, by address) without disturbing setup; a rank
// whose secret differs gets an AuthError from the verdict.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/tcp/connection.h"
#include "lockstep/core/deadline.h"
#include "lockstep/store/store.h"

namespace lockstep::tcp {

struct MeshOptions {
  std::string group;  // the group's name: scopes the store keys, hashed into hellos
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;
  std::string advertise_address;  // what peers connect to (empty: this host's name)
  std::string hostname;           // shown in peers' error messages
  int socket_buffer_bytes = 0;    // SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning
  std::string secret;             // the job's secret ("": connections are not authenticated)
  Deadline deadline{Clock::now()};
};

// Builds the mesh. Blocks until every peer is connected or the deadline passes (TimeoutError
// naming the ranks that never connected). Collective over the group. The returned vector has one
// entry per rank; this rank's entry is null. Sockets are non-blocking with TCP_NODELAY.
std::vector<std::unique_ptr<Connection>> connect_mesh(const MeshOptions& options);

}  // namespace lockstep::tcp
