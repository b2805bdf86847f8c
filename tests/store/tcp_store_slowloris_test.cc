// Clients that crawl (store/server_limits.h): one sends its hello a byte a second, one sends a
// request a byte a second after a good handshake, one asks for a large value and never reads it.
// None holds up the ranks, which keep meeting meanwhile, and each is dropped at its deadline:
// kHandshakeTimeout after connecting, kTransferGrace after the request's first byte or after the
// reply's first bytes left.
#include <thread>

#include "lockstep/store/tcp_store.h"
#include "store/protocol.h"
#include "store/server_limits.h"
#include "store_abuse.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

namespace sl = store_limits;

constexpr int kRanks = 4;
// What a 4-rank rendezvous may take beside the crawlers; it takes tens of milliseconds alone.
constexpr milliseconds kRendezvousBound{3'000};
// How late after its deadline a crawler may be seen dropped (the server's wake-up, the sender's
// look every 50 ms, a loaded machine).
constexpr milliseconds kLateness{2'000};
constexpr milliseconds kByteInterval{1'000};

class TcpStoreSlowloris : public ::testing::Test {
 protected:
  TcpStoreServer server_{{.bind_host = "127.0.0.1", .port = 0, .secret = kAbuseSecret}};
  uint16_t port() const { return server_.port(); }
};

void expect_dropped_near(SlowSender& s, milliseconds deadline, const char* what) {
  std::optional<milliseconds> at = s.dropped_after(deadline + kLateness);
  ASSERT_TRUE(at.has_value()) << what << " still connected " << (deadline + kLateness).count()
                              << " ms after it started";
  EXPECT_GE(*at, deadline - milliseconds(200)) << what << " dropped before its deadline";
  EXPECT_LE(*at, deadline + kLateness) << what;
}

TEST_F(TcpStoreSlowloris, ByteASecondClientsAreDroppedAtTheirDeadlinesWhileRanksRendezvous) {
  SlowSender in_hello(raw_connect(port()), hello_bytes(), kByteInterval);
  SlowSender in_request(raw_authenticated(port(), kAbuseSecret),
                        set_announcing("slow", 100) + std::string(100, 'x'), kByteInterval);
  // Ranks meet again and again while the two crawl, until both are gone.
  int rounds = 0;
  const auto start = Clock::now();
  while ((!in_hello.dropped_after(milliseconds(0)) || !in_request.dropped_after(milliseconds(0))) &&
         Clock::now() - start < sl::kTransferGrace + kLateness) {
    EXPECT_LT(run_rendezvous(port(), kRanks, kAbuseSecret, milliseconds(10'000)), kRendezvousBound)
        << "rendezvous " << rounds << ", " << ms_since(start) << " ms into the crawl";
    ++rounds;
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_GE(rounds, 5);
  expect_dropped_near(in_hello, sl::kHandshakeTimeout, "a client sending its hello slowly");
  EXPECT_LT(in_hello.sent(), store_proto::kClientHelloBytes);
  expect_dropped_near(in_request, sl::kTransferGrace, "a client sending a request slowly");
  TcpStore probe({.port = port(), .timeout = milliseconds(5'000), .secret = kAbuseSecret});
  EXPECT_FALSE(probe.check({"slow"})) << "the crawling set was carried out";
}

TEST_F(TcpStoreSlowloris, AClientThatNeverReadsItsReplyIsDroppedAfterTheGrace) {
  // Far more than the socket buffers between the server and the client take.
  constexpr size_t kBig = 48 << 20;
  TcpStore writer({.port = port(), .timeout = milliseconds(10'000), .secret = kAbuseSecret});
  writer.set("big", std::string(kBig, 'v'));
  auto reader = raw_authenticated(port(), kAbuseSecret);
  const auto asked = Clock::now();
  const std::string get = std::string(1, '\x02') + std::string("\xe8\x03\0\0\0\0\0\0", 8) +
                          std::string("\x01\0\0\0", 4) + std::string("\x03\0\0\0\0\0\0\0", 8) +
                          "big";
  raw_send(reader.get(), get);  // get "big" (1000 ms), and then never read
  EXPECT_LT(run_rendezvous(port(), kRanks, kAbuseSecret, milliseconds(10'000)), kRendezvousBound);
  std::this_thread::sleep_until(asked + sl::kTransferGrace + kLateness);
  // Now read: what the server had handed its socket before it gave up, then the end.
  size_t seen = 0;
  EXPECT_TRUE(closed_by_peer(reader.get(), milliseconds(5'000), &seen))
      << "the server still holds the connection " << ms_since(asked) << " ms after the request";
  EXPECT_LT(seen, kBig) << "the whole reply went out: the client was not dropped";
  EXPECT_EQ(writer.get("big").size(), kBig);
}

}  // namespace
}  // namespace lockstep::store_test
