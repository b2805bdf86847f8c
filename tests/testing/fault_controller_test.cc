// FaultController (src/testing/fault_controller.h) on its own, from one thread: held packets
// arrive only when released, in the order the test chooses; drop_next discards exactly the next
// packets; a cut keeps what was delivered, loses what was held and refuses the rest, both ways;
// kAnyRank holds every link of a rank; epoch() and wait_change() lose no change; a rank waiting
// since the latest change is quiet.
#include "testing/fault_controller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace lockstep::testing {
namespace {

using Fate = FaultController::Fate;

std::vector<std::byte> bytes_of(int v) {
  return {std::byte(v)};
}

// The value of the next delivered packet of from->to, -1 when none.
int next(FaultController& f, int from, int to) {
  auto p = f.take(from, to);
  return p ? static_cast<int>(p->bytes.at(0)) : -1;
}

TEST(FaultController, PacketsAreDeliveredAtOnceAndInOrderByDefault) {
  FaultController f(2);
  EXPECT_EQ(f.send(1, 0, bytes_of(1)), Fate::delivered);
  EXPECT_EQ(f.send(1, 0, bytes_of(2)), Fate::delivered);
  EXPECT_TRUE(f.has_packet(1, 0));
  EXPECT_FALSE(f.has_packet(0, 1));
  EXPECT_EQ(next(f, 1, 0), 1);
  EXPECT_EQ(next(f, 1, 0), 2);
  EXPECT_EQ(next(f, 1, 0), -1);
}

TEST(FaultController, HeldPacketsArriveOnlyWhenReleasedInTheChosenOrder) {
  FaultController f(2);
  f.hold(1, 0);
  for (int v = 1; v <= 4; ++v) EXPECT_EQ(f.send(1, 0, bytes_of(v)), Fate::held);
  EXPECT_EQ(f.send(0, 1, bytes_of(9)), Fate::delivered);  // the other direction is not held
  EXPECT_EQ(f.held(1, 0), 4u);
  EXPECT_EQ(next(f, 1, 0), -1);
  f.release_at(1, 0, 2);  // 3 overtakes 1 and 2
  EXPECT_EQ(next(f, 1, 0), 3);
  EXPECT_EQ(next(f, 1, 0), -1);
  f.release_next(1, 0);
  EXPECT_EQ(next(f, 1, 0), 1);
  EXPECT_EQ(f.held(1, 0), 2u);
  EXPECT_EQ(f.send(1, 0, bytes_of(5)), Fate::held);  // still holding
  f.release(1, 0);                                   // the rest, oldest first, and stops holding
  EXPECT_EQ(next(f, 1, 0), 2);
  EXPECT_EQ(next(f, 1, 0), 4);
  EXPECT_EQ(next(f, 1, 0), 5);
  EXPECT_EQ(f.send(1, 0, bytes_of(6)), Fate::delivered);
  EXPECT_EQ(next(f, 1, 0), 6);
  EXPECT_THROW(f.release_next(1, 0), std::logic_error);
  EXPECT_THROW(f.hold(1, 3), std::logic_error);
}

TEST(FaultController, AnyRankHoldsEveryLinkOfARankAndReleaseKeepsTheSendOrderAcrossLinks) {
  FaultController f(3);
  f.hold(2, kAnyRank);
  EXPECT_EQ(f.send(2, 1, bytes_of(1)), Fate::held);
  EXPECT_EQ(f.send(2, 0, bytes_of(2)), Fate::held);
  EXPECT_EQ(f.send(2, 1, bytes_of(3)), Fate::held);
  EXPECT_EQ(f.send(0, 2, bytes_of(4)), Fate::delivered);
  // Links by their oldest held packet: 2->1 (packet 1) before 2->0 (packet 2).
  EXPECT_EQ(f.held_links(), (std::vector<std::pair<int, int>>{{2, 1}, {2, 0}}));
  f.release_next(2, 0);
  EXPECT_EQ(f.held_links(), (std::vector<std::pair<int, int>>{{2, 1}}));
  f.release(2, kAnyRank);
  EXPECT_TRUE(f.held_links().empty());
  EXPECT_EQ(next(f, 2, 0), 2);
  EXPECT_EQ(next(f, 2, 1), 1);
  EXPECT_EQ(next(f, 2, 1), 3);
}

TEST(FaultController, DropNextDiscardsExactlyTheNextPackets) {
  FaultController f(2);
  f.drop_next(0, 1, 2);
  EXPECT_EQ(f.send(0, 1, bytes_of(1)), Fate::dropped);
  EXPECT_EQ(f.send(0, 1, bytes_of(2)), Fate::dropped);
  EXPECT_EQ(f.send(0, 1, bytes_of(3)), Fate::delivered);
  EXPECT_EQ(f.dropped(0, 1), 2u);
  EXPECT_EQ(next(f, 0, 1), 3);
  EXPECT_EQ(next(f, 0, 1), -1);
}

TEST(FaultController, ACutKeepsWhatWasDeliveredLosesWhatWasHeldAndRefusesTheRestBothWays) {
  FaultController f(3);
  EXPECT_EQ(f.cut_reason(0, 1), "");
  EXPECT_EQ(f.send(1, 0, bytes_of(1)), Fate::delivered);
  f.hold(1, 0);
  EXPECT_EQ(f.send(1, 0, bytes_of(2)), Fate::held);
  f.cut(0, 1);
  EXPECT_EQ(f.held(1, 0), 0u);
  EXPECT_EQ(next(f, 1, 0), 1);
  EXPECT_EQ(next(f, 1, 0), -1);
  EXPECT_EQ(f.send(1, 0, bytes_of(3)), Fate::refused);
  EXPECT_EQ(f.send(0, 1, bytes_of(4)), Fate::refused);
  EXPECT_EQ(f.send(0, 2, bytes_of(5)), Fate::delivered);  // other links are whole
  const std::string why = "the link between rank 0 and rank 1 was cut by the fault controller";
  EXPECT_EQ(f.cut_reason(0, 1), why);
  EXPECT_EQ(f.cut_reason(1, 0), why);
  EXPECT_EQ(f.cut_reason(0, 2), "");
}

TEST(FaultController, EndPacketsAreNeverDroppedButWaitBehindHeldOnes) {
  FaultController f(2);
  f.hold(0, 1);
  f.drop_next(0, 1);
  EXPECT_EQ(f.send(0, 1, bytes_of(1)), Fate::dropped);
  EXPECT_EQ(f.send(0, 1, bytes_of(2)), Fate::held);
  f.send_end(0, 1);
  EXPECT_FALSE(f.has_packet(0, 1));
  f.release(0, 1);
  EXPECT_FALSE(f.next_is_end(0, 1));
  EXPECT_EQ(next(f, 0, 1), 2);
  EXPECT_TRUE(f.next_is_end(0, 1));
}

TEST(FaultController, WaitChangeLosesNoChangeAndAWaitingRankIsQuiet) {
  FaultController f(2);
  // A change after the look and before the wait: the wait returns at once (no deadline hit).
  uint64_t seen = f.epoch();
  f.send(0, 1, bytes_of(1));
  const auto far = Clock::now() + std::chrono::hours(1);
  f.wait_change(1, seen, far);
  EXPECT_NE(f.epoch(), seen);
  // Rank 1 waits on the latest epoch, rank 0 finishes: quiet. A send by rank 0's side wakes it.
  f.finished(0);
  seen = f.epoch();
  std::thread waiter([&] { f.wait_change(1, seen, far); });
  f.wait_quiet();  // returns only once rank 1 waits on `seen`
  EXPECT_EQ(f.epoch(), seen);
  f.poke();
  waiter.join();
  EXPECT_FALSE(f.all_finished());
  f.finished(1);
  EXPECT_TRUE(f.all_finished());
}

TEST(FaultController, WaitHeldReturnsOnceTheLinkHoldsThatMany) {
  FaultController f(2);
  f.hold(0, 1);
  std::thread sender([&] {
    for (int v = 0; v < 3; ++v) f.send(0, 1, bytes_of(v));
  });
  f.wait_held(0, 1, 3);
  EXPECT_EQ(f.held(0, 1), 3u);
  sender.join();
}

}  // namespace
}  // namespace lockstep::testing
