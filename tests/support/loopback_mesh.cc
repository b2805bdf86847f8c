#include "support/loopback_mesh.h"

#include <chrono>

#include "backends/tcp/mesh.h"

namespace lockstep::testing {

std::unique_ptr<tcp::TcpTransport> connect_loopback_mesh(const std::string& group, int rank,
                                                         int size, std::shared_ptr<Store> store) {
  auto conns = tcp::connect_mesh({.group = group,
                                  .rank = rank,
                                  .size = size,
                                  .store = store,
                                  .advertise_address = "127.0.0.1",
                                  .hostname = "test-host",
                                  .deadline = Deadline::after(std::chrono::seconds(30))});
  return std::make_unique<tcp::TcpTransport>(
      std::move(conns),
      tcp::TransportIdentity{
          .group = group, .rank = rank, .size = size, .hostname = "test-host", .store = store});
}

}  // namespace lockstep::testing
