// One rank's TcpTransport over a real loopback mesh whose ranks are threads of this process
// (each thread calls this with its rank): the algorithm harness and the mesh channel's tests.
#pragma once

#include <memory>
#include <string>

#include "backends/tcp/tcp_transport.h"
#include "lockstep/store/store.h"

namespace lockstep::testing {

// Connects `rank` of `size` to the others of `group` through `store` (within 30 s), with host
// name "test-host" in every message.
std::unique_ptr<tcp::TcpTransport> connect_loopback_mesh(const std::string& group, int rank,
                                                         int size, std::shared_ptr<Store> store);

}  // namespace lockstep::testing
