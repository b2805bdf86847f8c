// SocketChannel with ranks as threads of this process, over a shared HashStore: streams arrive
// in order and intact (every byte checked) with random chunk sizes in all directions at once at
// world 2 and 4, and a 64 MiB stream; a full socket makes write() return 0 until the peer reads;
// sleep() returns on data, a new connection, room and wake(), and keeps to `until`; a reader that
// never sleeps still sees new bytes after service(); broken()
// after close() comes after every byte; garbage connections are dropped without disturbing the
// streams; a peer that never publishes, or that refuses, makes write() fail naming it (at once
// after closing()). (socket_channel_process_test.cc: the same with a child process, killed or
// closing.)
#include "p2p/socket_channel.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"
#include "socket_channel_testing.h"

namespace lockstep::p2p {
namespace {

using namespace std::chrono_literals;
using testing::pump;

std::vector<std::unique_ptr<SocketChannel>> make_group(const std::string& name, int size,
                                                       std::shared_ptr<Store> store = nullptr) {
  if (!store) store = std::make_shared<HashStore>();
  std::vector<std::unique_ptr<SocketChannel>> group;
  for (int r = 0; r < size; ++r)
    group.push_back(std::make_unique<SocketChannel>(testing::config_for(store, name, r, size)));
  return group;
}

// Every rank in its own thread, each sending bytes_of(me, peer) to every peer (itself included).
void run_all(std::vector<std::unique_ptr<SocketChannel>>& group,
             const std::function<uint64_t(int, int)>& bytes_of) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      int me = static_cast<int>(r);
      pump(*group[r], me, static_cast<int>(group.size()), bytes_of, static_cast<unsigned>(me) + 1);
    });
  for (auto& t : threads) t.join();
}

TEST(SocketChannel, StreamsAreIntactBothWaysAtWorld2) {
  auto group = make_group("w2", 2);
  EXPECT_STREQ(group[0]->kind(), "socket");
  run_all(group, [](int src, int dst) -> uint64_t { return src == dst ? 0 : 6u << 20; });
}

TEST(SocketChannel, StreamsAreIntactAllToAllAtWorld4) {
  auto group = make_group("w4", 4);
  run_all(group, [](int src, int dst) -> uint64_t { return (1u << 20) + 4099u * (src * 4 + dst); });
}

TEST(SocketChannel, A64MiBStreamArrivesIntact) {
  auto group = make_group("big", 2);
  run_all(group, [](int src, int dst) -> uint64_t { return src == 0 && dst == 1 ? 64u << 20 : 0; });
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Reads whatever rank `from` has sent to `ch` now (servicing first); returns the byte count.
size_t drain(SocketChannel& ch, int from) {
  std::vector<std::byte> buf(1 << 16);
  size_t total = 0;
  ch.service();
  while (size_t n = ch.read(from, buf.data(), buf.size())) total += n;
  return total;
}

TEST(SocketChannel, WriteReturnsZeroWhenFullAndRoomComesBackAfterThePeerReads) {
  auto group = make_group("full", 2);
  SocketChannel& a = *group[0];
  SocketChannel& b = *group[1];
  std::vector<std::byte> chunk(1 << 16, std::byte{7});
  auto deadline = Deadline::after(5s);
  size_t written = 0, n = 0;
  for (int i = 0; i < 100000 && (n = a.write(1, chunk.data(), chunk.size(), deadline)) > 0; ++i)
    written += n;
  ASSERT_EQ(n, 0u) << "the socket never filled";
  EXPECT_GT(written, 0u);
  EXPECT_EQ(a.write(1, chunk.data(), chunk.size(), deadline), 0u);
  // No room: sleep waits for it until `until`, not longer.
  const int peer = 1;
  auto t0 = Clock::now();
  a.sleep(Clock::now() + 200ms, std::span(&peer, 1));
  EXPECT_GE(seconds_since(t0), 0.19);
  EXPECT_LT(seconds_since(t0), 1.0);
  // The peer reads: room comes back, sleep notices at once, and writes are taken again.
  size_t got = 0;
  for (int i = 0; i < 200 && got < written; ++i) {
    got += drain(b, 0);
    if (got < written) b.sleep(Clock::now() + 10ms, {});
  }
  EXPECT_EQ(got, written);
  t0 = Clock::now();
  a.sleep(Clock::now() + 5s, std::span(&peer, 1));
  EXPECT_LT(seconds_since(t0), 1.0);
  EXPECT_GT(a.write(1, chunk.data(), chunk.size(), deadline), 0u);
  EXPECT_EQ(a.broken(1), "");
  EXPECT_EQ(b.broken(0), "");
}

TEST(SocketChannel, SleepReturnsOnDataConnectionAndWakeAndKeepsToUntil) {
  auto group = make_group("sleep", 2);
  SocketChannel& a = *group[0];
  SocketChannel& b = *group[1];
  // Nothing happens: until is kept (and a past one returns at once).
  auto t0 = Clock::now();
  a.sleep(t0 + 150ms, {});
  EXPECT_GE(seconds_since(t0), 0.14);
  EXPECT_LT(seconds_since(t0), 1.0);
  t0 = Clock::now();
  a.sleep(t0 - 1s, {});
  EXPECT_LT(seconds_since(t0), 0.5);
  // A wake before the sleep makes it return at once; one during it, too (from another thread).
  a.wake();
  t0 = Clock::now();
  a.sleep(t0 + 5s, {});
  EXPECT_LT(seconds_since(t0), 0.5);
  std::thread waker([&] {
    std::this_thread::sleep_for(50ms);
    a.wake();
  });
  t0 = Clock::now();
  a.sleep(t0 + 5s, {});
  EXPECT_LT(seconds_since(t0), 1.0);
  waker.join();
  // A new connection (b's first write) wakes a's sleep; so does data on an existing one.
  const std::byte one[1] = {std::byte{42}};
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(b.write(0, one, 1, Deadline::after(5s)), 1u);
  });
  t0 = Clock::now();
  a.sleep(t0 + 5s, {});
  EXPECT_LT(seconds_since(t0), 1.0);
  writer.join();
  size_t got = 0;
  for (int i = 0; i < 100 && got == 0; ++i, a.sleep(Clock::now() + 10ms, {})) got = drain(a, 1);
  EXPECT_EQ(got, 1u);
  writer = std::thread([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(b.write(0, one, 1, Deadline::after(5s)), 1u);
  });
  a.service();
  t0 = Clock::now();
  a.sleep(t0 + 5s, {});
  EXPECT_LT(seconds_since(t0), 1.0);
  writer.join();
  // Bytes and an EOF that a leaves unread (service() saw them) do not end sleeps: no spinning.
  b.close();
  a.service();
  t0 = Clock::now();
  a.sleep(t0 + 150ms, {});
  EXPECT_GE(seconds_since(t0), 0.14);
  std::byte byte{};
  EXPECT_EQ(a.read(1, &byte, 1), 1u);
  EXPECT_EQ(byte, std::byte{42});
  EXPECT_EQ(a.read(1, &byte, 1), 0u);
  EXPECT_EQ(a.broken(1), "rank 1 closed its end of the stream");
}

TEST(SocketChannel, AReaderThatNeverSleepsSeesNewBytesThroughService) {
  // An engine busy with other work never sleeps: service()'s poll alone must bring reads on.
  auto group = make_group("busy", 2);
  SocketChannel& a = *group[0];
  SocketChannel& b = *group[1];
  for (uint8_t v = 1; v <= 3; ++v) {
    std::byte x{v}, y{};
    ASSERT_EQ(b.write(0, &x, 1, Deadline::after(5s)), 1u);
    size_t n = 0;
    for (auto t0 = Clock::now(); n == 0 && Clock::now() - t0 < 2s;) {
      a.service();
      n = a.read(1, &y, 1);
    }
    ASSERT_EQ(n, 1u) << "byte " << int{v};
    EXPECT_EQ(y, x);
    EXPECT_EQ(a.read(1, &y, 1), 0u);  // nothing more: the next byte comes after this
  }
}

TEST(SocketChannel, BrokenAfterCloseComesAfterEveryByte) {
  auto group = make_group("close", 2);
  SocketChannel& a = *group[0];
  SocketChannel& b = *group[1];
  std::vector<std::byte> data(3 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(testing::pattern(1, 0, i));
  // b writes everything (a reads meanwhile), closes, and a still gets every byte before broken().
  size_t sent = 0, got = 0;
  std::vector<std::byte> in(1 << 16);
  auto deadline = Deadline::after(10s);
  bool saw_close = false;
  while (!deadline.expired()) {
    if (sent < data.size()) {
      sent += b.write(0, data.data() + sent, data.size() - sent, deadline);
      if (sent == data.size()) b.close();
    }
    a.service();
    size_t n = a.read(1, in.data(), in.size());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], data[got + i]) << "byte " << got + i;
    got += n;
    std::string why = a.broken(1);
    if (!why.empty()) {
      EXPECT_EQ(got, data.size()) << "broken() before every byte was read: " << why;
      EXPECT_EQ(why, "rank 1 closed its end of the stream");
      saw_close = true;
      break;
    }
    if (n == 0) a.sleep(Clock::now() + 5ms, {});
  }
  EXPECT_TRUE(saw_close);
  EXPECT_EQ(got, data.size());
  EXPECT_EQ(b.broken(0), "");  // a never wrote to b: nothing to report there
}

// A raw connection to `ch`'s listener.
net::Fd raw_client(const SocketChannel& ch) {
  auto colon = ch.address().rfind(':');
  return net::connect_tcp(ch.address().substr(0, colon),
                          static_cast<uint16_t>(std::stoi(ch.address().substr(colon + 1))),
                          Deadline::after(3s), false);
}

// Sends bytes on a raw connection; returns whether `ch` dropped it (EOF or reset) within 3 s.
bool dropped(SocketChannel& ch, const void* bytes, size_t n, bool close_after = false) {
  net::Fd fd = raw_client(ch);
  if (n > 0) net::write_full(fd.get(), bytes, n, Deadline::after(3s), "the channel");
  if (close_after) ::shutdown(fd.get(), SHUT_WR);
  auto deadline = Deadline::after(3s);
  while (!deadline.expired()) {
    ch.service();
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 10) > 0) {
      char c;
      return ::recv(fd.get(), &c, 1, MSG_DONTWAIT) <= 0;
    }
  }
  return false;
}

TEST(SocketChannel, GarbageConnectionsAreDroppedWithoutDisturbingTheStreams) {
  auto group = make_group("garbage", 2);
  SocketChannel& a = *group[0];
  SocketChannel& b = *group[1];
  std::vector<std::byte> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(testing::pattern(1, 0, i));
  auto deadline = Deadline::after(10s);
  std::vector<std::byte> in(data.size());
  size_t sent = 0, got = 0;
  auto transfer = [&](size_t upto) {  // b sends and a reads data[0, upto)
    while (got < upto && !deadline.expired()) {
      if (sent < upto) sent += b.write(0, data.data() + sent, upto - sent, deadline);
      a.service();
      size_t n = a.read(1, in.data() + got, upto - got);
      if (n == 0) a.sleep(Clock::now() + 5ms, {});
      got += n;
    }
  };
  transfer(data.size() / 2);  // a has taken b's connection: it is rank 1's

  std::string junk(200, 'x');
  EXPECT_TRUE(dropped(a, junk.data(), junk.size())) << "garbage";
  net::Hello h{.magic = 0x78787878, .version = 0x78787878};
  EXPECT_TRUE(dropped(a, &h, 20, true)) << "a partial hello, then EOF";
  // Real hellos that do not fit: another group, a rank out of range, a rank already connected.
  const auto real = [&] {
    net::Hello r{.service = net::Service::p2p, .size = 2, .rank = 1};
    r.group_hash = 14695981039346656037ull;
    for (unsigned char c : std::string("garbage"))
      r.group_hash = (r.group_hash ^ c) * 1099511628211ull;
    return r;
  };
  h = real();
  h.group_hash ^= 1;
  EXPECT_TRUE(dropped(a, &h, sizeof(h))) << "another group";
  h = real();
  h.rank = 2;
  EXPECT_TRUE(dropped(a, &h, sizeof(h))) << "rank out of range";
  h = real();
  EXPECT_TRUE(dropped(a, &h, sizeof(h))) << "rank 1 twice";

  transfer(data.size());
  ASSERT_EQ(got, data.size());
  EXPECT_TRUE(in == data);
  EXPECT_EQ(a.broken(1), "");
}

TEST(SocketChannel, SleepersOnOtherThreadsDisturbNothing) {
  // channel.h [Threads]: sleep() runs beside the other calls. Here two extra threads per rank
  // sleep in a loop while the ranks stream, and junk connections come and go (some dropped while
  // a sleep() polls them).
  auto group = make_group("threads", 2);
  std::atomic<bool> stop{false};
  std::vector<std::thread> helpers;
  for (int i = 0; i < 4; ++i)
    helpers.emplace_back([&, i] {
      while (!stop) group[static_cast<size_t>(i % 2)]->sleep(Clock::now() + 2ms, {});
    });
  helpers.emplace_back([&] {
    std::string junk(100, 'x');
    try {
      for (int i = 0; i < 40 && !stop; ++i) {
        net::Fd fd = raw_client(*group[static_cast<size_t>(i % 2)]);
        net::write_full(fd.get(), junk.data(), i % 3 == 0 ? junk.size() : 10, Deadline::after(3s),
                        "the channel");
        std::this_thread::sleep_for(1ms);
      }
    } catch (const Error&) {  // the ranks finished and closed their listeners first
    }
  });
  run_all(group, [](int src, int dst) -> uint64_t { return src == dst ? 0 : 3u << 20; });
  stop = true;
  for (auto& t : helpers) t.join();
}

TEST(SocketChannel, WriteToAPeerThatNeverPublishesTimesOutNamingIt) {
  auto store = std::make_shared<HashStore>();
  SocketChannel a(testing::config_for(store, "lonely", 0, 3));
  std::byte x{};
  auto t0 = Clock::now();
  try {
    a.write(2, &x, 1, Deadline::after(300ms));
    FAIL() << "write succeeded";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 never published"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 2.0);
}

// Writes a byte to rank 1, which refuses connections, with a long deadline: the write must fail
// with a NetworkError saying rank 1 (at `address`) refuses them. Returns its text.
std::string refused_write(SocketChannel& a, const std::string& address) {
  std::byte x{};
  try {
    a.write(1, &x, 1, Deadline::after(30s));
    ADD_FAILURE() << "write succeeded";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 (" + address + ") refuses connections"),
              std::string::npos)
        << e.what();
    return e.what();
  }
  return "";
}

TEST(SocketChannel, WriteToAPeerThatRefusesFailsNamingItsAddress) {
  auto store = std::make_shared<HashStore>();
  SocketChannel a(testing::config_for(store, "gone", 0, 2));
  std::string address = SocketChannel(testing::config_for(store, "gone", 1, 2)).address();
  std::byte x{};
  // Before the deadline: TimeoutError naming the peer and its address.
  try {
    a.write(1, &x, 1, Deadline::after(300ms));
    FAIL() << "write succeeded";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 (" + address + ")"), std::string::npos)
        << e.what();
  }
  // A long deadline: it refused for long enough to count as gone.
  auto t0 = Clock::now();
  refused_write(a, address);
  EXPECT_LT(seconds_since(t0), 5.0);
}

// After closing() only goodbyes are written: a peer that refuses has left, at the first refusal,
// rather than after the couple of seconds a live rank's write gives it.
TEST(SocketChannel, AfterClosingARefusingPeerHasLeftAtOnce) {
  auto store = std::make_shared<HashStore>();
  SocketChannel a(testing::config_for(store, "leaving", 0, 2));
  std::string address = SocketChannel(testing::config_for(store, "leaving", 1, 2)).address();
  a.closing();
  auto t0 = Clock::now();
  const std::string error = refused_write(a, address);
  EXPECT_NE(error.find("it has left"), std::string::npos) << error;
  EXPECT_LT(seconds_since(t0), 0.5);
}

}  // namespace
}  // namespace lockstep::p2p
