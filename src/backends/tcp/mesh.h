// Mesh: the full set of connections of one rank, one socket per pair of ranks.
//
// Each rank listens on an ephemeral port (all interfaces) and publishes
// "<group>/tcp/addr/<rank>" = "<advertise address>:<port>|<hostname>|<pid>" in the store. It then
// connects to every lower rank and accepts every higher one. The connector opens with a hello
// (magic, version, group-name hash, world size, its rank and pid) and the acceptor answers with
// its own; a connection whose hello is anything else (a port scanner, another group, a stale
// process) is closed and logged without disturbing setup.
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
  Deadline deadline{Clock::now()};
};

// Builds the mesh. Blocks until every peer is connected or the deadline passes (TimeoutError
// naming the ranks that never connected). Collective over the group. The returned vector has one
// entry per rank; this rank's entry is null. Sockets are non-blocking with TCP_NODELAY.
std::vector<std::unique_ptr<Connection>> connect_mesh(const MeshOptions& options);

// "<group>/tcp/addr/<rank>".
std::string mesh_address_key(const std::string& group, int rank);

}  // namespace lockstep::tcp
