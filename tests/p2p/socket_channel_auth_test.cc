// SocketChannel with the job's secret (src/net/peer_auth.h), ranks as threads over real sockets:
// streams between ranks that share it arrive intact; a writer with another secret gets an
// AuthError from write() and the reader never reads a byte of its stream; an outsider that knows
// the hello but not the secret is refused with a verdict, and the real rank's stream is intact.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "core/fnv1a.h"
#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"
#include "net/peer_auth.h"
#include "p2p/socket_channel.h"
#include "socket_channel_testing.h"
#include "support/messages.h"

namespace lockstep::p2p {
namespace {

using namespace std::chrono_literals;

GroupConfig config_with(std::shared_ptr<Store> store, const std::string& name, int rank, int size,
                        std::string secret) {
  GroupConfig c = testing::config_for(std::move(store), name, rank, size);
  c.secret = std::move(secret);
  return c;
}

TEST(SocketChannelAuth, StreamsBetweenRanksWithTheSecretAreIntact) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::unique_ptr<SocketChannel>> group;
  for (int r = 0; r < 3; ++r)
    group.push_back(std::make_unique<SocketChannel>(config_with(store, "same", r, 3, "s3cret")));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      testing::pump(
          *group[static_cast<size_t>(r)], r, 3,
          [](int src, int dst) -> uint64_t { return src == dst ? 0 : 1u << 20; },
          static_cast<unsigned>(r) + 1);
    });
  for (auto& t : threads) t.join();
}

// Rank 1 writes with another secret while rank 0 services its listener: rank 1's write() fails
// with an AuthError naming rank 0 within a moment, and rank 0 never reads a byte from it.
TEST(SocketChannelAuth, AWriterWithAnotherSecretGetsAnAuthErrorAndDeliversNothing) {
  auto store = std::make_shared<HashStore>();
  SocketChannel a(config_with(store, "differs", 0, 2, "the job's secret"));
  SocketChannel b(config_with(store, "differs", 1, 2, "another secret"));
  std::string error;
  const auto start = Clock::now();
  std::vector<std::byte> chunk(4096, std::byte{1});
  std::vector<std::byte> in(4096);
  size_t read = 0;
  while (error.empty() && Clock::now() - start < 5s) {
    try {
      b.write(0, chunk.data(), chunk.size(), Deadline::after(5s));
    } catch (const AuthError& e) {
      error = e.what();
    }
    a.service();
    read += a.read(1, in.data(), in.size());
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(lockstep::testing::contains(error, "rank 0")) << error;
  EXPECT_TRUE(lockstep::testing::contains(error, "refused this rank: their secrets differ"))
      << error;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);
  EXPECT_EQ(read, 0u) << "rank 0 read bytes of a stream whose writer it refused";
  EXPECT_EQ(b.broken(0), std::string(error).substr(error.find("rank 0")));
}

// An outsider connects to rank 0 first with a well-formed hello claiming rank 1 and a made-up
// proof, then stream bytes: it reads a refusal and the end of the stream, its bytes are never
// read, and the real rank 1's stream then arrives intact.
TEST(SocketChannelAuth, AnOutsiderWithoutTheSecretIsRefusedAndTheRealStreamIsIntact) {
  auto store = std::make_shared<HashStore>();
  SocketChannel a(config_with(store, "outsider", 0, 2, "s3cret"));
  SocketChannel b(config_with(store, "outsider", 1, 2, "s3cret"));
  const std::string& address = a.address();
  const auto colon = address.rfind(':');
  Deadline d = Deadline::after(5s);
  net::Fd fd =
      net::connect_tcp(address.substr(0, colon),
                       static_cast<uint16_t>(std::stoi(address.substr(colon + 1))), d, false);
  net::Hello h{.service = net::Service::p2p,
               .flags = net::kHasSecret,
               .group_hash = fnv1a("outsider"),
               .size = 2,
               .rank = 1};
  auth::ConnectProof forged;
  forged.proof.fill(0x5a);
  const std::string payload(1000, 'x');
  net::write_full(fd.get(), &h, sizeof h, d, "outsider");
  net::write_full(fd.get(), &forged, sizeof forged, d, "outsider");
  net::write_full(fd.get(), payload.data(), payload.size(), d, "outsider");
  auth::Verdict verdict;
  for (size_t got = 0; got < sizeof verdict && !d.expired();) {
    a.service();
    ssize_t n = ::recv(fd.get(), reinterpret_cast<char*>(&verdict) + got, sizeof verdict - got,
                       MSG_DONTWAIT);
    if (n > 0)
      got += static_cast<size_t>(n);
    else
      std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(verdict.status, auth::VerdictStatus::wrong_proof);
  char more = 0;
  EXPECT_LE(::recv(fd.get(), &more, 1, 0), 0) << "the outsider got more than its verdict";

  std::vector<std::byte> data(1 << 20), in(data.size());
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(testing::pattern(1, 0, i));
  size_t sent = 0, got = 0;
  while (got < data.size() && !d.expired()) {
    if (sent < data.size()) sent += b.write(0, data.data() + sent, data.size() - sent, d);
    a.service();
    got += a.read(1, in.data() + got, in.size() - got);
  }
  ASSERT_EQ(got, data.size());
  EXPECT_TRUE(in == data) << "the outsider's bytes got into rank 1's stream";
  EXPECT_EQ(a.broken(1), "");
  EXPECT_EQ(b.broken(0), "");
}

}  // namespace
}  // namespace lockstep::p2p
