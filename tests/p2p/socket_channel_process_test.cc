// SocketChannel across real processes (the test binary re-runs itself in child mode as rank 1,
// joined through a TcpStore this process hosts): streams both ways arrive intact and an orderly
// close() is reported as such; a child SIGKILLed after sending is reported dead by name, after
// every byte it sent, and writes to it then fail naming it.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "p2p/socket_channel.h"
#include "socket_channel_testing.h"
#include "support/child_mode.h"
#include "support/subprocess.h"

namespace lockstep::p2p {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kChildBytes = 4 << 20;  // each way

uint64_t both_ways(int src, int dst) {
  return src == dst ? 0 : kChildBytes;
}

// ---- child entry point: rank 1 of group "proc" ----

TEST(SocketChannelChild, DISABLED_Rank1) {
  const char* port = std::getenv("SOCKCH_STORE_PORT");
  const char* mode = std::getenv("SOCKCH_MODE");
  ASSERT_TRUE(port && mode);
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{
      .host = "127.0.0.1", .port = static_cast<uint16_t>(std::atoi(port)), .timeout = 20s});
  SocketChannel ch(testing::config_for(store, "proc", 1, 2));
  if (std::string(mode) == "close") {
    testing::pump(ch, 1, 2, both_ways, 7);  // ends with close()
    return;
  }
  // "hang": send the stream, say so, and idle (servicing) until killed.
  std::vector<std::byte> out(1 << 16);
  uint64_t sent = 0;
  const int parent = 0;
  while (sent < kChildBytes) {
    size_t n = std::min<uint64_t>(out.size(), kChildBytes - sent);
    for (size_t i = 0; i < n; ++i) out[i] = std::byte(testing::pattern(1, 0, sent + i));
    size_t w = ch.write(0, out.data(), n, Deadline::after(20s));
    if (w == 0) ch.sleep(Clock::now() + 50ms, std::span(&parent, 1));
    sent += w;
  }
  store->set("test/sent", "1");
  for (;;) {
    ch.service();
    ch.sleep(Clock::now() + 100ms, {});
  }
}

// ---- parent side ----

struct ChildRank {
  std::shared_ptr<TcpStore> store =
      std::make_shared<TcpStore>(TcpStoreOptions{.port = 0, .is_server = true, .timeout = 20s});
  SocketChannel ch{testing::config_for(store, "proc", 0, 2)};
  ::lockstep::testing::Child child;

  explicit ChildRank(const std::string& mode)
      : child(::lockstep::testing::child_argv("SocketChannelChild.DISABLED_Rank1"),
              {{"SOCKCH_STORE_PORT", std::to_string(store->port())}, {"SOCKCH_MODE", mode}}) {}
};

TEST(SocketChannelProcess, StreamsBothWaysThenAnOrderlyClose) {
  ChildRank job("close");
  testing::pump(job.ch, 0, 2, both_ways, 3);  // checks every byte, then "rank 1 closed ..."
  auto result = job.child.wait(20s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(job.ch.broken(1), "rank 1 closed its end of the stream");
}

TEST(SocketChannelProcess, AKilledChildIsReportedDeadByRankAfterItsBytes) {
  ChildRank job("hang");
  // Read the child's whole stream, checking every byte; broken() stays "" meanwhile.
  std::vector<std::byte> in(1 << 16);
  uint64_t got = 0;
  auto deadline = Deadline::after(20s);
  while (got < kChildBytes) {
    ASSERT_FALSE(deadline.expired()) << "got " << got << " bytes";
    job.ch.service();
    size_t n = job.ch.read(1, in.data(), in.size());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<uint8_t>(in[i]), testing::pattern(1, 0, got + i)) << "byte " << got + i;
    got += n;
    if (n == 0) {
      ASSERT_EQ(job.ch.broken(1), "");
      job.ch.sleep(Clock::now() + 20ms, {});
    }
  }
  job.store->get("test/sent", 20s);
  // The parent connects to the child too, then the child dies.
  std::byte x{1};
  EXPECT_EQ(job.ch.write(1, &x, 1, Deadline::after(5s)), 1u);
  job.child.kill(SIGKILL);
  auto t0 = Clock::now();
  std::string why;
  while ((why = job.ch.broken(1)).empty() && Clock::now() - t0 < 5s) {
    job.ch.service();
    EXPECT_EQ(job.ch.read(1, in.data(), in.size()), 0u);
    job.ch.sleep(Clock::now() + 20ms, {});
  }
  EXPECT_NE(why.find("rank 1 (pid "), std::string::npos) << why;
  EXPECT_NE(why.find(" died"), std::string::npos) << why;
  EXPECT_LT(Clock::now() - t0, 2s) << why;
  // Writes to it fail (the first may still be buffered), naming it.
  try {
    for (int i = 0; i < 100; ++i) {
      job.ch.write(1, &x, 1, Deadline::after(5s));
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "writes to a dead rank kept succeeding";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("the connection to rank 1 ("), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockstep::p2p
