// [Loopback congestion control] (net/congestion.h): a loopback connection that would be paced by
// bbr is switched to an unpaced congestion control, on both ends.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>

#include "net/congestion.h"
#include "net/socket.h"

namespace lockstep::net {
namespace {

std::string congestion(int fd) {
  char name[16] = {};
  socklen_t len = sizeof(name);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "?";
  return std::string(name, strnlen(name, sizeof(name)));
}

bool set_congestion(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                      static_cast<socklen_t>(name.size())) == 0;
}

TEST(LoopbackCongestion, BbrOnALoopbackConnectionIsReplacedOnBothEnds) {
  Fd listener = listen_tcp("127.0.0.1", 0);
  const auto deadline = Deadline::after(std::chrono::seconds(10));
  Fd client = connect_tcp("127.0.0.1", local_port(listener.get()), deadline, false);
  Fd server = accept_tcp(listener.get(), deadline);
  if (!set_congestion(client.get(), "bbr") || !set_congestion(server.get(), "bbr"))
    GTEST_SKIP() << "bbr is not available to this user";
  unpace_local_connection(client.get());
  tune_tcp(server.get(), 0);  // tune_tcp does it too
  for (int fd : {client.get(), server.get()}) {
    const std::string cc = congestion(fd);
    EXPECT_TRUE(cc == "cubic" || cc == "reno") << cc;
  }
}

TEST(LoopbackCongestion, AnUnpacedChoiceIsLeftAlone) {
  Fd listener = listen_tcp("127.0.0.1", 0);
  const auto deadline = Deadline::after(std::chrono::seconds(10));
  Fd client = connect_tcp("127.0.0.1", local_port(listener.get()), deadline, false);
  ASSERT_TRUE(set_congestion(client.get(), "reno"));
  unpace_local_connection(client.get());
  EXPECT_EQ(congestion(client.get()), "reno");
}

}  // namespace
}  // namespace lockstep::net
