// TcpStore connection life: connecting before the server exists, nothing listening, a port in
// use, is_server, the server going away under a waiting client, and a server that is not ours.
#include <cstdio>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "store/protocol.h"
#include "store_test_util.h"
#include "support/subprocess.h"

namespace lockstep::store_test {
namespace {

using lockstep::testing::free_port;

TcpStoreOptions client_options(uint16_t port, milliseconds timeout = milliseconds(10'000)) {
  return {.host = "127.0.0.1", .port = port, .timeout = timeout};
}

TEST(TcpStoreLifecycle, ConnectRetriesUntilTheServerAppears) {
  auto port = static_cast<uint16_t>(free_port());
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(500));
    server = std::make_unique<TcpStoreServer>(
        TcpStoreServerOptions{.bind_host = "127.0.0.1", .port = port});
  });
  auto t0 = Clock::now();
  TcpStore client(client_options(port));
  auto elapsed = ms_since(t0);
  starter.join();
  EXPECT_GE(elapsed, 450);
  EXPECT_LT(elapsed, 5000);
  client.set("k", "v");
  EXPECT_EQ(client.get("k", milliseconds(1000)), "v");
}

TEST(TcpStoreLifecycle, NothingListeningTimesOutNamingTheAddressAndTheSocketError) {
  auto port = free_port();
  auto t0 = Clock::now();
  auto msg = message_of<TimeoutError>(
      [&] { TcpStore client(client_options(static_cast<uint16_t>(port), milliseconds(1000))); });
  auto elapsed = ms_since(t0);
  EXPECT_GE(elapsed, 900);
  EXPECT_LT(elapsed, 3000);
  EXPECT_CONTAINS(msg, "127.0.0.1:" + std::to_string(port));
  EXPECT_CONTAINS(msg, "Connection refused");
}

TEST(TcpStoreLifecycle, PortInUseNamesThePort) {
  TcpStoreServer first({.bind_host = "127.0.0.1", .port = 0});
  auto port = first.port();
  auto msg = message_of<NetworkError>(
      [&] { TcpStoreServer second({.bind_host = "127.0.0.1", .port = port}); });
  EXPECT_CONTAINS(msg, "port " + std::to_string(port));
  EXPECT_CONTAINS(msg, "in use");
  auto via_store = message_of<NetworkError>([&] {
    TcpStore store(
        {.host = "127.0.0.1", .port = port, .is_server = true, .timeout = milliseconds(2000)});
  });
  EXPECT_CONTAINS(via_store, "port " + std::to_string(port));
  EXPECT_CONTAINS(via_store, "--master-port");
}

TEST(TcpStoreLifecycle, IsServerWithPortZeroPicksAFreePortAndServesOthers) {
  TcpStore master({.host = "127.0.0.1", .port = 0, .is_server = true});
  ASSERT_NE(master.port(), 0);
  EXPECT_EQ(master.local_address(), "127.0.0.1");
  TcpStore worker(client_options(master.port()));
  master.set("from-master", "hello");
  EXPECT_EQ(worker.get("from-master", milliseconds(1000)), "hello");
  EXPECT_EQ(worker.port(), master.port());
  EXPECT_EQ(worker.local_address(), "127.0.0.1");
}

TEST(TcpStoreLifecycle, ServerDestroyedWhileAClientWaitsFailsTheClientPromptly) {
  auto server = std::make_unique<TcpStoreServer>(TcpStoreServerOptions{.bind_host = "127.0.0.1"});
  auto port = server->port();
  TcpStore waiter(client_options(port, milliseconds(60'000)));
  std::vector<std::unique_ptr<TcpStore>> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(std::make_unique<TcpStore>(client_options(port)));
  std::string msg;
  Clock::time_point failed_at;
  std::thread blocked([&] {
    msg = message_of<NetworkError>([&] { waiter.get("never", milliseconds(60'000)); });
    failed_at = Clock::now();
  });
  std::this_thread::sleep_for(milliseconds(200));
  auto t0 = Clock::now();
  server.reset();
  EXPECT_LT(ms_since(t0), 1000) << "server shutdown was slow";
  blocked.join();
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(failed_at - t0).count(), 2000);
  EXPECT_CONTAINS(msg, "127.0.0.1:" + std::to_string(port));
  // The connection is gone for good: later calls fail at once, naming the server.
  auto again = message_of<NetworkError>([&] { waiter.set("k", "v"); });
  EXPECT_CONTAINS(again, "127.0.0.1:" + std::to_string(port));
  auto idle_msg = message_of<NetworkError>([&] { idle[0]->add("n", 1); });
  EXPECT_CONTAINS(idle_msg, "127.0.0.1:" + std::to_string(port));
}

TEST(TcpStoreLifecycle, AServerThatIsNotALockstepStoreIsReported) {
  auto listener = net::listen_tcp("127.0.0.1", 0);
  auto port = net::local_port(listener.get());
  std::thread http([&] {
    auto conn = net::accept_tcp(listener.get(), Deadline::after(milliseconds(5000)));
    std::string reply = "HTTP/1.1 400 Bad Request\r\n\r\n";
    net::write_full(conn.get(), reply.data(), reply.size(), Deadline::after(milliseconds(5000)),
                    "client");
    std::this_thread::sleep_for(milliseconds(100));
  });
  auto msg = message_of<NetworkError>([&] { TcpStore client(client_options(port)); });
  http.join();
  EXPECT_CONTAINS(msg, "127.0.0.1:" + std::to_string(port));
  EXPECT_CONTAINS(msg, "not a lockstep store");
}

TEST(TcpStoreLifecycle, OverLimitKeyIsRejectedBeforeSending) {
  TcpStore store({.port = 0, .is_server = true});
  std::string long_key(store_proto::kMaxKeyBytes + 1, 'k');
  auto msg = message_of<InvalidArgument>([&] { store.set(long_key, "v"); });
  EXPECT_CONTAINS(msg, std::to_string(store_proto::kMaxKeyBytes));
  auto get_msg = message_of<InvalidArgument>([&] { store.get(long_key, milliseconds(10)); });
  EXPECT_CONTAINS(get_msg,
                  "TcpStore key of " + std::to_string(store_proto::kMaxKeyBytes + 1) + " bytes");
  EXPECT_CONTAINS(get_msg,
                  "exceeds the limit of " + std::to_string(store_proto::kMaxKeyBytes) + " bytes");
  store.set("still", "usable");
  EXPECT_EQ(store.get("still", milliseconds(1000)), "usable");
}

// Thousands of round trips: every get, on a second connection, returns exactly what the first
// connection set under that key (no reply is lost, stale or another key's). The loopback
// round-trip times of set and get are printed and recorded for information only: no bound on
// them, since a test must not depend on the machine's speed (before, the test asserted nothing
// but the value of one key, which it could not fail to read).
TEST(TcpStoreLifecycle, ThousandsOfRoundTripsReadWhatWasSetAndReportTheirTime) {
  TcpStore store({.port = 0, .is_server = true});
  TcpStore reader(client_options(store.port()));
  constexpr int kWarmup = 200;
  constexpr int kIters = 5000;
  for (int i = 0; i < kWarmup; ++i) store.set("rt", "x");
  auto t0 = Clock::now();
  for (int i = 0; i < kIters; ++i)
    store.set("rt/" + std::to_string(i), "value " + std::to_string(i));
  auto t1 = Clock::now();
  for (int i = 0; i < kIters; ++i)
    ASSERT_EQ(reader.get("rt/" + std::to_string(i), milliseconds(1000)),
              "value " + std::to_string(i));
  auto t2 = Clock::now();
  EXPECT_EQ(store.num_keys(), kIters + 1);
  double set_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kIters;
  double get_us = std::chrono::duration<double, std::micro>(t2 - t1).count() / kIters;
  std::printf("[ timing   ] TcpStore loopback round trip: set %.1f us, get %.1f us\n", set_us,
              get_us);
  RecordProperty("set_us", std::to_string(set_us));
  RecordProperty("get_us", std::to_string(get_us));
}

}  // namespace
}  // namespace lockstep::store_test
