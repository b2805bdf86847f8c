// The store server out of file descriptors (store/server_limits.h), in a process of its own with
// a limit of a few dozen: it makes room for each new connection by dropping the oldest one that
// has not finished its handshake, so ranks behind a flood still rendezvous; with none to drop, it
// keeps serving the clients it holds, waits without spinning, and accepts again as soon as a
// descriptor frees. It logs the shortage once.
#include <poll.h>

#include <thread>

#include "lockstep/store/tcp_store.h"
#include "store_abuse.h"
#include "store_server_child.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

using testing::count_of;

// The server's limit on open files: room for a few dozen connections.
constexpr long kLimit = 64;
constexpr int kRanks = 4;
// What a 4-rank rendezvous may take under abuse; it takes tens of milliseconds without.
constexpr milliseconds kRendezvousBound{3'000};
constexpr const char* kOnce = "out of file descriptors (";

TEST(TcpStoreFdLimit, RanksBehindAFloodRendezvousAsTheOldestUnauthenticatedAreDropped) {
  constexpr int kIdle = 300;
  ServerChild server(kLimit);
  std::vector<net::Fd> idle =
      open_idle_connections(server.port(), kIdle, 20, Deadline::after(milliseconds(10'000)));
  // The ranks queue behind the whole flood, and each is accepted only by dropping an older one.
  EXPECT_LT(run_rendezvous(server.port(), kRanks, kAbuseSecret, milliseconds(10'000)),
            kRendezvousBound);
  EXPECT_TRUE(closed_by_peer(idle.front().get(), milliseconds(1'000)))
      << "the oldest unauthenticated connection was not the one dropped";
  // Still out of descriptors: a second rendezvous finishes as well.
  EXPECT_LT(run_rendezvous(server.port(), kRanks, kAbuseSecret, milliseconds(10'000)),
            kRendezvousBound);
  ServerReport report = server.stop();
  EXPECT_EQ(count_of(report.output, kOnce), 1u) << report.output;
  EXPECT_CONTAINS(report.output, "drops the oldest one that has not finished its handshake");
}

TEST(TcpStoreFdLimit, FullOfAuthenticatedClientsItServesThemAndWaitsWithoutSpinning) {
  ServerChild server(kLimit);
  TcpStore job({.port = server.port(), .timeout = milliseconds(10'000), .secret = kAbuseSecret});
  // Authenticated clients until the server has no descriptor left for the next.
  std::vector<net::Fd> clients;
  while (auto fd = try_authenticate(server.port(), kAbuseSecret, milliseconds(1'000))) {
    raw_round_trip(fd->get());  // authenticated now, so never the one dropped to make room
    clients.push_back(std::move(*fd));
    ASSERT_LT(clients.size(), size_t{kLimit}) << "the server's limit on open files did not hold";
  }
  ASSERT_GT(clients.size(), 10u);
  net::Fd waiting = raw_connect(server.port());  // queued by the kernel, not accepted
  raw_send(waiting.get(), hello_bytes());

  // A listener that stays readable must not make the server spin.
  const long cpu_before = cpu_ms_of(server.pid());
  std::this_thread::sleep_for(milliseconds(1'000));
  EXPECT_LT(cpu_ms_of(server.pid()) - cpu_before, 200)
      << "ms of CPU the server used in 1 s, out of descriptors with a connection waiting";
  // The clients it holds are served.
  job.set("still", "served");
  EXPECT_EQ(job.get("still"), "served");
  raw_round_trip(clients.back().get());

  // A client leaves: the waiting connection is accepted, and its hello answered.
  clients.front().reset();
  pollfd p{waiting.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 2'000), 1) << "the waiting connection was not accepted";
  ServerReport report = server.stop();
  EXPECT_EQ(count_of(report.output, kOnce), 1u) << report.output;
}

}  // namespace
}  // namespace lockstep::store_test
