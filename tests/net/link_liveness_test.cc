// Link liveness (net/socket.h): LOCKSTEP_LINK_TIMEOUT's parse, the options every TCP connection
// gets from tune_tcp on a real socket, and the wording of an unreachable host. A real silent
// partition is cut in tests/multihost/partition.sh.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <map>
#include <string>

#include "core/settings_parse.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "net/socket.h"

namespace lockstep::net {
namespace {

Settings parse(const std::map<std::string, std::string>& env) {
  static std::map<std::string, std::string> current;
  current = env;
  return parse_settings([](const char* name) -> const char* {
    auto it = current.find(name);
    return it == current.end() ? nullptr : it->second.c_str();
  });
}

int int_option(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof value;
  EXPECT_EQ(::getsockopt(fd, level, name, &value, &len), 0) << errno_text(errno);
  return value;
}

TEST(LinkLiveness, TimeoutIsTenSecondsByDefaultFractionalOrOff) {
  EXPECT_EQ(parse({}).link_timeout.count(), 10'000);
  EXPECT_EQ(parse({{"LOCKSTEP_LINK_TIMEOUT", "2.5"}}).link_timeout.count(), 2'500);
  EXPECT_EQ(parse({{"LOCKSTEP_LINK_TIMEOUT", "0"}}).link_timeout.count(), 0);
  for (const char* bad : {"-1", "ten", ""}) {
    try {
      parse({{"LOCKSTEP_LINK_TIMEOUT", bad}});
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("LOCKSTEP_LINK_TIMEOUT"), std::string::npos) << e.what();
    }
  }
}

// A connected pair over loopback.
struct Pair {
  Fd listener = listen_tcp("127.0.0.1", 0);
  Fd client = connect_tcp("127.0.0.1", local_port(listener.get()),
                          Deadline::after(std::chrono::seconds(5)), false);
  Fd server = accept_tcp(listener.get(), Deadline::after(std::chrono::seconds(5)));
};

TEST(LinkLiveness, EveryTunedConnectionProbesItsPeerHost) {
  Pair p;
  tune_tcp(p.client.get(), 0);
  const int fd = p.client.get();
  EXPECT_EQ(int_option(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
  // The default 10 s: the first probe after 3 s idle, then every second; the connection fails
  // once nothing was acknowledged for 10 s.
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE), 3);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL), 1);
  EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 10'000);
}

TEST(LinkLiveness, ScalesWithTheTimeoutAndIsOffAtZero) {
  Pair p;
  keep_link_alive(p.client.get(), std::chrono::seconds(60));
  EXPECT_EQ(int_option(p.client.get(), IPPROTO_TCP, TCP_KEEPIDLE), 20);
  EXPECT_EQ(int_option(p.client.get(), IPPROTO_TCP, TCP_KEEPINTVL), 6);
  EXPECT_EQ(int_option(p.client.get(), IPPROTO_TCP, TCP_USER_TIMEOUT), 60'000);
  keep_link_alive(p.server.get(), std::chrono::milliseconds(0));
  EXPECT_EQ(int_option(p.server.get(), SOL_SOCKET, SO_KEEPALIVE), 0);
}

TEST(LinkLiveness, AnUnreachableHostIsWordedAsAPartition) {
  EXPECT_TRUE(is_unreachable(ETIMEDOUT));
  EXPECT_TRUE(is_unreachable(EHOSTUNREACH));
  EXPECT_TRUE(is_unreachable(ENETUNREACH));
  EXPECT_FALSE(is_unreachable(ECONNRESET));
  EXPECT_FALSE(is_unreachable(0));
  const std::string t = unreachable_text(ETIMEDOUT);
  EXPECT_NE(t.find("acknowledged for 10 s (LOCKSTEP_LINK_TIMEOUT)"), std::string::npos) << t;
  EXPECT_NE(t.find("network partition"), std::string::npos) << t;
  EXPECT_NE(unreachable_text(EHOSTUNREACH).find("cannot be reached"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::net
