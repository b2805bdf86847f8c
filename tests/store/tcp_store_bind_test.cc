// Where the store a rank hosts listens (src/net/bind.h): on the address it is reached at, so a
// job on 127.0.0.1 is not open on every interface (pytorch/pytorch#173909); an explicit bind
// address overrides; and an address this host does not have falls back to every interface.
#include <gtest/gtest.h>

#include "lockstep/store/tcp_store.h"
#include "net/bind.h"
#include "net/socket.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

// Whether something accepts connections at host:port.
bool reachable(const std::string& host, uint16_t port) {
  net::Fd fd;
  return net::connect_tcp_once(host, port, Deadline::after(2s), fd) == 0;
}

TEST(TcpStoreBind, AStoreHostedFor127001ListensOnLoopbackOnly) {
  TcpStore store({.host = "127.0.0.1", .port = 0, .is_server = true, .timeout = 10s, .secret = ""});
  EXPECT_TRUE(reachable("127.0.0.1", store.port()));
  // 127.0.0.2 is this host's loopback too: a listener on every interface would answer there.
  EXPECT_FALSE(reachable("127.0.0.2", store.port()));
}

TEST(TcpStoreBind, AnAddressThisHostHasIsBoundAndOthersFallBackToEveryInterface) {
  EXPECT_TRUE(net::is_local_address("127.0.0.1"));
  EXPECT_TRUE(net::is_local_address("localhost"));
  EXPECT_FALSE(net::is_local_address("192.0.2.1"));  // TEST-NET-1: never a host's address
  EXPECT_FALSE(net::is_local_address(""));
  EXPECT_EQ(net::bind_address_for("127.0.0.1", "test"), "127.0.0.1");
  EXPECT_EQ(net::bind_address_for("192.0.2.1", "test"), "0.0.0.0");
  EXPECT_EQ(net::bind_address_for("127.0.0.1", "test", "0.0.0.0"), "0.0.0.0");  // the override
}

TEST(TcpStoreBind, TheOverrideBindsEveryInterface) {
  net::Fd listener = net::listen_tcp(net::bind_address_for("127.0.0.1", "test", "0.0.0.0"), 0);
  const uint16_t port = net::local_port(listener.get());
  EXPECT_TRUE(reachable("127.0.0.2", port));
}

}  // namespace
}  // namespace lockstep
