#include "backends/tcp/group_transport.h"

#include "backends/tcp/mesh.h"

namespace lockstep::tcp {

namespace {

// SO_SNDBUF/SO_RCVBUF of every data socket (docs/algorithms.md: measured on loopback).
constexpr int kSocketBufferBytes = 4 * 1024 * 1024;

}  // namespace

std::unique_ptr<TcpTransport> connect_group_transport(const GroupConfig& config,
                                                      const std::string& hostname) {
  auto conns = connect_mesh({.group = config.name,
                             .rank = config.rank,
                             .size = config.size,
                             .store = config.store,
                             .advertise_address = config.advertise_address,
                             .hostname = hostname,
                             .socket_buffer_bytes = kSocketBufferBytes,
                             .secret = config.secret,
                             .deadline = Deadline::after(config.timeout)});
  return std::make_unique<TcpTransport>(std::move(conns), TransportIdentity{.group = config.name,
                                                                            .rank = config.rank,
                                                                            .size = config.size,
                                                                            .hostname = hostname,
                                                                            .store = config.store});
}

}  // namespace lockstep::tcp
