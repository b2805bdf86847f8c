// BlockingWatch (src/backends/nccl/blocking_watch.h), for real and without a GPU: an armed watch
// fires once at the deadline or on check()'s reason, a disarmed one never does, and the reason
// is there for the caller the blocked NCCL call returns to.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "backends/nccl/blocking_watch.h"

namespace lockstep::nccl {
namespace {

using namespace std::chrono_literals;

struct Fires {
  std::atomic<int> count{0};
  std::string reason;  // written by the watch's thread before count
};

TEST(NcclBlockingWatch, AnArmedWatchFiresOnceAtTheDeadline) {
  Fires f;
  BlockingWatch watch([] { return std::optional<std::string>(); },
                      [&](const std::string& r) {
                        f.reason = r;
                        ++f.count;
                      });
  auto start = Clock::now();
  watch.arm(Deadline::after(300ms));
  while (f.count.load() == 0 && Clock::now() - start < 5s) std::this_thread::sleep_for(5ms);
  auto waited = Clock::now() - start;
  EXPECT_EQ(f.count.load(), 1);
  EXPECT_EQ(f.reason, "");
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 1s);
  ASSERT_TRUE(watch.fired().has_value());
  EXPECT_EQ(*watch.fired(), "");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(f.count.load(), 1) << "fired twice";
  watch.disarm();
}

TEST(NcclBlockingWatch, CheckReasonFiresBeforeTheDeadline) {
  Fires f;
  std::atomic<bool> note{false};
  BlockingWatch watch(
      [&]() -> std::optional<std::string> {
        if (note.load()) return "the group was aborted by rank 3 (host h): boom";
        return std::nullopt;
      },
      [&](const std::string& r) {
        f.reason = r;
        ++f.count;
      });
  watch.arm(Deadline::after(60s));
  std::this_thread::sleep_for(250ms);
  EXPECT_EQ(f.count.load(), 0);
  EXPECT_FALSE(watch.fired().has_value());
  note = true;
  auto start = Clock::now();
  while (f.count.load() == 0 && Clock::now() - start < 5s) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(f.count.load(), 1);
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(watch.fired(),
            std::optional<std::string>("the group was aborted by rank 3 (host h): boom"));
}

TEST(NcclBlockingWatch, ADisarmedWatchNeverFires) {
  Fires f;
  BlockingWatch watch([] { return std::optional<std::string>("a reason"); },
                      [&](const std::string&) { ++f.count; });
  { ArmedWatch armed(&watch, Deadline::after(1ms)); }  // the call returned by itself at once
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(f.count.load(), 0);
  EXPECT_FALSE(watch.fired().has_value());
  ArmedWatch none(nullptr, Deadline::after(1ms));  // a non-blocking communicator: no watch
}

}  // namespace
}  // namespace lockstep::nccl
