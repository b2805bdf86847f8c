// MemoryChannel (src/testing/memory_channel.h) from one thread: a stream's bytes come back in
// order across writes, in reads of any size; a held write is invisible until released; close()
// shows as broken() only after every byte; a cut keeps the delivered bytes, then broken() and
// the next write name the cut; sleep() returns at a wake() made before it, and at a change after
// the last service(), with no deadline reached.
#include "testing/memory_channel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "lockstep/core/error.h"

namespace lockstep::testing {
namespace {

const auto kFar = std::chrono::hours(1);

std::vector<std::byte> iota_bytes(size_t n, int first) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>(first + i));
  return v;
}

struct Pair {
  std::shared_ptr<FaultController> faults = std::make_shared<FaultController>(2);
  MemoryChannel a{faults, 0}, b{faults, 1};
};

TEST(MemoryChannel, BytesComeBackInOrderAcrossWritesInReadsOfAnySize) {
  Pair p;
  EXPECT_STREQ(p.a.kind(), "memory");
  auto one = iota_bytes(5, 0), two = iota_bytes(7, 5);
  const auto deadline = Deadline::after(std::chrono::seconds(1));
  EXPECT_EQ(p.b.write(0, one.data(), one.size(), deadline), 5u);
  EXPECT_TRUE(p.b.write_whole(0, two.data(), two.size(), deadline));
  std::byte got[12];
  EXPECT_EQ(p.a.read(1, got, 3), 3u);
  EXPECT_EQ(p.a.read(1, got + 3, 100), 9u);
  EXPECT_EQ(std::vector<std::byte>(got, got + 12), iota_bytes(12, 0));
  EXPECT_EQ(p.a.read(1, got, 1), 0u);
  EXPECT_EQ(p.a.broken(1), "");
}

TEST(MemoryChannel, AHeldWriteIsInvisibleUntilReleased) {
  Pair p;
  p.faults->hold(1, 0);
  auto bytes = iota_bytes(4, 1);
  EXPECT_EQ(p.b.write(0, bytes.data(), 4, Deadline::after(std::chrono::seconds(1))), 4u);
  std::byte got[4];
  EXPECT_EQ(p.a.read(1, got, 4), 0u);
  EXPECT_EQ(p.a.broken(1), "");
  p.faults->release(1, 0);
  EXPECT_EQ(p.a.read(1, got, 4), 4u);
  EXPECT_EQ(std::vector<std::byte>(got, got + 4), bytes);
}

TEST(MemoryChannel, CloseShowsAsBrokenOnlyAfterEveryByte) {
  Pair p;
  auto bytes = iota_bytes(3, 9);
  p.b.write(0, bytes.data(), 3, Deadline::after(std::chrono::seconds(1)));
  p.b.close();
  EXPECT_EQ(p.a.broken(1), "");
  std::byte got[8];
  EXPECT_EQ(p.a.read(1, got, 8), 3u);
  EXPECT_EQ(p.a.read(1, got, 8), 0u);
  EXPECT_EQ(p.a.broken(1), "rank 1 closed its end of the stream");
  EXPECT_THROW(p.b.write(0, bytes.data(), 3, Deadline::after(std::chrono::seconds(1))),
               InvalidArgument);
}

TEST(MemoryChannel, ACutKeepsTheDeliveredBytesThenBrokenAndWritesNameIt) {
  Pair p;
  auto bytes = iota_bytes(6, 0);
  const auto deadline = Deadline::after(std::chrono::seconds(1));
  p.b.write(0, bytes.data(), 2, deadline);
  p.faults->hold(1, 0);
  p.b.write(0, bytes.data() + 2, 4, deadline);  // in flight: lost at the cut
  p.faults->cut(0, 1);
  const std::string why = "the link between rank 0 and rank 1 was cut by the fault controller";
  EXPECT_EQ(p.a.broken(1), "");  // 2 bytes still to read
  std::byte got[6];
  EXPECT_EQ(p.a.read(1, got, 6), 2u);
  EXPECT_EQ(p.a.broken(1), why);
  EXPECT_EQ(p.b.broken(0), why);
  try {
    p.a.write(1, bytes.data(), 1, deadline);
    ADD_FAILURE() << "a write on a cut link went through";
  } catch (const NetworkError& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
}

TEST(MemoryChannel, SleepReturnsAtAnEarlierWakeAndAtAChangeAfterService) {
  Pair p;
  p.a.wake();
  p.a.sleep(Clock::now() + kFar, {});  // returns: the wake came first
  p.a.service();
  auto byte = iota_bytes(1, 0);
  p.b.write(0, byte.data(), 1, Deadline::after(std::chrono::seconds(1)));
  p.a.sleep(Clock::now() + kFar, {});  // returns: a packet came after service()
  // A wake from another thread, before or during the sleep: it returns either way.
  p.a.service();
  std::thread waker([&] { p.a.wake(); });
  p.a.sleep(Clock::now() + kFar, {});
  waker.join();
  SUCCEED();
}

}  // namespace
}  // namespace lockstep::testing
