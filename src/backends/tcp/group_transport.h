// The tcp transport of a whole group: the mesh of connections (mesh.h) wrapped as a TcpTransport,
// as the tcp backend and the hierarchical backend's flat mesh both use it.
#pragma once

#include <memory>
#include <string>

#include "backends/tcp/tcp_transport.h"
#include "comm/group_config.h"

namespace lockstep::tcp {

// Connects to every member of config's group (collective; bounded by config.timeout). `hostname`
// is this rank's host as peers' error messages show it.
std::unique_ptr<TcpTransport> connect_group_transport(const GroupConfig& config,
                                                      const std::string& hostname);

}  // namespace lockstep::tcp
