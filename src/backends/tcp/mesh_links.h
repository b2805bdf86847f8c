// MeshLinks: a tcp mesh's connections as the group's p2p channel shares them (comm/peer_links.h):
// one Connection per peer, carrying the collectives' frames and the p2p stream (connection.h).
#pragma once

#include <memory>
#include <vector>

#include "backends/tcp/connection.h"
#include "comm/peer_links.h"
#include "net/socket.h"

namespace lockstep::tcp {

struct MeshLinks final : PeerLinks {
  std::vector<std::shared_ptr<Connection>> conns;  // one per rank; null at this rank's index
  // An eventfd in the transport's poll: the p2p side signals it when it read collective bytes
  // off a socket (the transport's poll no longer sees them there).
  net::Fd transport_wake;
};

}  // namespace lockstep::tcp
