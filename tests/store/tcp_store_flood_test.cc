// The store server under a flood of connections that never authenticate (store/server_limits.h):
// 10,000 held open at once while real ranks rendezvous, each dropped at the handshake deadline.
// (tcp_store_fd_limit_test.cc: the same when the server runs out of file descriptors.)
#include <cstdlib>
#include <functional>
#include <thread>

#include "lockstep/store/tcp_store.h"
#include "net/fd_limit.h"
#include "store/server_limits.h"
#include "store_abuse.h"
#include "store_test_util.h"
#include "support/child_mode.h"
#include "support/subprocess.h"
#include "support/wait_for.h"

namespace lockstep::store_test {
namespace {

namespace sl = store_limits;

constexpr int kFlood = 10'000;
// Descriptors each process needs beyond the flood: its own files, the ranks' connections.
constexpr int kHeadroom = 512;
constexpr int kRanks = 4;
// What a 4-rank rendezvous may take under abuse; it takes tens of milliseconds without.
constexpr milliseconds kRendezvousBound{3'000};
// Server memory per idle connection (RSS). AddressSanitizer pads every allocation with redzones
// and holds freed memory in quarantine, which about quadruples the figure of small allocations.
#ifdef __SANITIZE_ADDRESS__
constexpr long kBytesPerConnection = 16'384;
#else
constexpr long kBytesPerConnection = 4'096;
#endif
constexpr const char* kPortVar = "LOCKSTEP_TEST_FLOOD_PORT";

// Waits until this process's count of descriptors satisfies ok, looking every 100 ms (each look
// reads thousands of entries of /proc/self/fd); false after timeout.
bool wait_for_fds(const std::function<bool(int)>& ok, milliseconds timeout) {
  return testing::wait_until(
      [&] {
        if (ok(open_fds())) return true;
        std::this_thread::sleep_for(milliseconds(95));
        return false;
      },
      timeout);
}

// Child mode: opens kFlood connections to the server (half with part of a hello), then holds
// them until killed.
TEST(TcpStoreFloodChild, DISABLED_HoldIdleConnections) {
  ASSERT_NE(std::getenv(kPortVar), nullptr) << "child mode only";
  ASSERT_GE(net::raise_fd_limit(kFlood + kHeadroom).soft, uint64_t{kFlood + kHeadroom});
  auto fds = open_idle_connections(static_cast<uint16_t>(std::atoi(std::getenv(kPortVar))), kFlood,
                                   20, Deadline::after(milliseconds(30'000)));
  for (;;) std::this_thread::sleep_for(milliseconds(1000));
}

TEST(TcpStoreFlood, RendezvousFinishesWhileTenThousandIdleConnectionsAreHeld) {
  if (net::raise_fd_limit(kFlood + kHeadroom).soft < kFlood + kHeadroom)
    GTEST_SKIP() << "the hard limit on open files (" << net::fd_limit().hard << ") is below the "
                 << kFlood + kHeadroom << " this test needs in each of its two processes";
  TcpStoreServer server({.bind_host = "127.0.0.1", .port = 0, .secret = kAbuseSecret});
  const int fds_before = open_fds();
  const long rss_before = status_kib("VmRSS");
  // The flood comes from another process: with the server's ends here, 10,000 of each would not
  // fit under one process's limit.
  testing::Child flood(testing::child_argv("TcpStoreFloodChild.DISABLED_HoldIdleConnections"),
                       {{kPortVar, std::to_string(server.port())}});
  const auto flood_start = Clock::now();
  ASSERT_TRUE(wait_for_fds([&](int n) { return n >= fds_before + kFlood; }, milliseconds(15'000)))
      << "the server holds " << open_fds() - fds_before << " of the " << kFlood
      << " connections after 15 s";
  const auto all_held = Clock::now();
  const long per_connection = (status_kib("VmRSS") - rss_before) * 1024 / kFlood;
  std::printf("[ figures  ] %d connections opened in %lld ms; server memory %ld bytes each\n",
              kFlood, static_cast<long long>((all_held - flood_start) / milliseconds(1)),
              per_connection);
  EXPECT_LT(per_connection, kBytesPerConnection)
      << "bytes of this process's RSS per idle connection";

  const milliseconds took =
      run_rendezvous(server.port(), kRanks, kAbuseSecret, milliseconds(10'000));
  EXPECT_LT(took, kRendezvousBound) << "rendezvous with " << kFlood << " connections held";

  // Each is dropped kHandshakeTimeout after it was accepted: all of them by then after the last.
  const auto all_dropped_by = all_held + sl::kHandshakeTimeout + milliseconds(3'000);
  ASSERT_TRUE(wait_for_fds(
      [&](int n) { return n <= fds_before + 1; },  // + the pipe from the flood's process
      std::chrono::duration_cast<milliseconds>(all_dropped_by - Clock::now())))
      << open_fds() - fds_before << " connections still held " << ms_since(all_held)
      << " ms after the last was accepted";
  EXPECT_GE(ms_since(all_held), sl::kHandshakeTimeout.count() - 500)
      << "connections dropped before their handshake deadline";
  EXPECT_TRUE(testing::process_alive(flood.pid()));
}

}  // namespace
}  // namespace lockstep::store_test
