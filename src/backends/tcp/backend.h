// The TCP backend: one socket per pair of ranks, on any hosts. Runs every op with the algorithms
// in src/algorithms over a TcpTransport.
#pragma once

#include <memory>

#include "comm/backend.h"

namespace lockstep::tcp {

// Connects to every member of the group through config.store (collective over the group: every
// member must call it, within config.timeout). Throws TimeoutError naming the ranks that never
// showed up, NetworkError when a peer cannot be reached.
std::unique_ptr<Backend> make_tcp_backend(const GroupConfig& config);

}  // namespace lockstep::tcp
