// The p2p engine (src/p2p/engine.h) over MemoryChannel (src/testing), ranks as threads, with the
// test's thread deciding when each write arrives: no sleeps, no timing.
//   - two messages with different tags, held and released one at a time, each complete the recv
//     of their own tag, whatever order those were posted in, and not the other;
//   - messages that arrived before any recv (unexpected) match recvs posted later in another
//     tag order;
//   - a recv from any source gets the sender whose message was released first, either way;
//   - a link cut after a message's header arrived but before its payload fails the recv with
//     the cut's reason, and the sender's next send too.
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <latch>
#include <mutex>
#include <thread>

#include "comm/group_config.h"
#include "lockstep/core/error.h"
#include "p2p/engine.h"
#include "testing/fault_controller.h"
#include "testing/memory_channel.h"

namespace lockstep::p2p {
namespace {

using lockstep::testing::FaultController;
using lockstep::testing::kAnyRank;
using lockstep::testing::MemoryChannel;

constexpr std::chrono::seconds kFailsafe{60};  // no test waits for it

GroupConfig config_of(int rank, int size) {
  GroupConfig c;
  c.name = "memory";
  c.rank = rank;
  c.size = size;
  for (int r = 0; r < size; ++r) c.global_ranks.push_back(r);
  c.hostname = "test-host";
  return c;
}

// Runs fn(rank, engine) on one thread per rank, each with an Engine over a MemoryChannel of
// `faults`, and driver on this thread meanwhile; joins them and rethrows the first exception.
void with_engines(const std::shared_ptr<FaultController>& faults,
                  const std::function<void(int, Engine&)>& fn,
                  const std::function<void()>& driver) {
  std::mutex mu;
  std::exception_ptr first;
  auto keep = [&](std::exception_ptr e) {
    std::lock_guard lock(mu);
    if (!first) first = e;
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < faults->size(); ++r)
    threads.emplace_back([&, r] {
      try {
        Engine engine(std::make_unique<MemoryChannel>(faults, r), config_of(r, faults->size()));
        fn(r, engine);
      } catch (...) {
        keep(std::current_exception());
      }
    });
  try {
    driver();
  } catch (...) {
    keep(std::current_exception());
  }
  faults->release(kAnyRank, kAnyRank);  // the byes that wait behind holds
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

WorkPtr post_one(Engine& e, Request r) {
  return e.post(std::span(&r, 1), Deadline::after(kFailsafe), r.is_send ? "send" : "recv");
}

WorkPtr send(Engine& e, int peer, uint32_t tag, const std::vector<float>& data, uint64_t seq) {
  return post_one(e, {.is_send = true,
                      .peer = peer,
                      .tag = tag,
                      .dtype = DType::f32,
                      .count = data.size(),
                      .input = data.data(),
                      .seq = seq});
}

WorkPtr recv(Engine& e, int peer, uint32_t tag, std::vector<float>& data, uint64_t seq) {
  return post_one(e, {.is_send = false,
                      .peer = peer,
                      .tag = tag,
                      .dtype = DType::f32,
                      .count = data.size(),
                      .output = data.data(),
                      .seq = seq});
}

// The error text of w (which must fail), "" and a failure when it does not.
std::string error_of(const WorkPtr& w) {
  try {
    w->wait(kFailsafe);
  } catch (const NetworkError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a NetworkError: " << e.what();
    return "";
  }
  ADD_FAILURE() << w->description() << " succeeded";
  return "";
}

std::vector<float> filled(float v, size_t n = 16) {
  return std::vector<float>(n, v);
}

TEST(MemoryEngine, TwoTagsReleasedOneAtATimeEachCompleteTheirOwnRecv) {
  auto faults = std::make_shared<FaultController>(2);
  faults->hold(1, 0);
  std::latch posted(1), first_done(1);
  with_engines(
      faults,
      [&](int rank, Engine& e) {
        if (rank == 1) {
          auto seven = filled(7), nine = filled(9);
          auto a = send(e, 0, 7, seven, 0);
          auto b = send(e, 0, 9, nine, 1);
          a->wait(kFailsafe);
          b->wait(kFailsafe);
          return;
        }
        std::vector<float> got9(16), got7(16);
        auto r9 = recv(e, 1, 9, got9, 0);  // posted first, its message comes second
        auto r7 = recv(e, 1, 7, got7, 1);
        posted.count_down();
        r7->wait(kFailsafe);
        EXPECT_EQ(got7, filled(7));
        EXPECT_FALSE(r9->is_completed());  // its message is still held
        first_done.count_down();
        r9->wait(kFailsafe);
        EXPECT_EQ(got9, filled(9));
      },
      [&] {
        faults->wait_held(1, 0, 2);
        posted.wait();
        faults->release_next(1, 0);  // tag 7
        first_done.wait();
        faults->release_next(1, 0);  // tag 9
      });
}

TEST(MemoryEngine, UnexpectedMessagesMatchRecvsPostedLaterInAnotherTagOrder) {
  auto faults = std::make_shared<FaultController>(2);
  faults->hold(1, 0);
  with_engines(
      faults,
      [&](int rank, Engine& e) {
        if (rank == 1) {
          auto seven = filled(7), nine = filled(9), five = filled(5);
          send(e, 0, 7, seven, 0)->wait(kFailsafe);
          send(e, 0, 9, nine, 1)->wait(kFailsafe);
          send(e, 0, 5, five, 2)->wait(kFailsafe);
          return;
        }
        std::vector<float> got5(16), got9(16), got7(16);
        // Done once tag 5 arrived: tags 7 and 9, ahead of it on the stream, are unexpected then.
        recv(e, 1, 5, got5, 0)->wait(kFailsafe);
        auto r9 = recv(e, 1, 9, got9, 1);
        auto r7 = recv(e, 1, 7, got7, 2);
        r9->wait(kFailsafe);
        r7->wait(kFailsafe);
        EXPECT_EQ(got5, filled(5));
        EXPECT_EQ(got9, filled(9));
        EXPECT_EQ(got7, filled(7));
      },
      [&] {
        faults->wait_held(1, 0, 3);
        faults->release(1, 0);
      });
}

class RecvAny : public ::testing::TestWithParam<int> {};

TEST_P(RecvAny, GetsTheSenderReleasedFirst) {
  const int first = GetParam(), second = 3 - first;
  auto faults = std::make_shared<FaultController>(3);
  faults->hold(kAnyRank, 0);
  std::latch posted(1), first_done(1);
  with_engines(
      faults,
      [&](int rank, Engine& e) {
        if (rank != 0) {
          auto data = filled(static_cast<float>(10 * rank), 4);
          send(e, 0, 0, data, 0)->wait(kFailsafe);
          return;
        }
        std::vector<float> a(4), b(4);
        auto ra = recv(e, kAnySource, 0, a, 0);
        posted.count_down();
        ra->wait(kFailsafe);
        EXPECT_EQ(ra->source_rank(), first);
        EXPECT_EQ(a, filled(static_cast<float>(10 * first), 4));
        first_done.count_down();
        auto rb = recv(e, kAnySource, 0, b, 1);
        rb->wait(kFailsafe);
        EXPECT_EQ(rb->source_rank(), second);
        EXPECT_EQ(b, filled(static_cast<float>(10 * second), 4));
      },
      [&] {
        faults->wait_held(1, 0, 1);
        faults->wait_held(2, 0, 1);
        posted.wait();
        faults->release(first, 0);
        first_done.wait();
        faults->release(second, 0);
      });
}

INSTANTIATE_TEST_SUITE_P(EitherSender, RecvAny, ::testing::Values(1, 2),
                         [](const auto& info) { return "Rank" + std::to_string(info.param); });

TEST(MemoryEngine, ACutMidMessageFailsTheRecvAndTheNextSendWithTheCut) {
  auto faults = std::make_shared<FaultController>(2);
  faults->hold(1, 0);
  std::latch posted(1), cut_done(1);
  const std::string cut = "the link between rank 0 and rank 1 was cut by the fault controller";
  with_engines(
      faults,
      [&](int rank, Engine& e) {
        if (rank == 1) {
          // 4 KiB: eager, over 512 bytes, so written as its header and then its payload.
          auto big = filled(1, 1024);
          send(e, 0, 0, big, 0)->wait(kFailsafe);  // in the channel: done
          cut_done.wait();
          auto small = filled(2, 4);
          EXPECT_EQ(error_of(send(e, 0, 0, small, 1)), "send #1 to rank 0: " + cut);
          return;
        }
        std::vector<float> got(1024);
        auto r = recv(e, 1, 0, got, 0);
        posted.count_down();
        EXPECT_EQ(error_of(r), "recv #0 from rank 1: " + cut);
      },
      [&] {
        faults->wait_held(1, 0, 2);  // the frame's header, then its payload
        posted.wait();
        faults->release_next(1, 0);  // the header only
        faults->cut(0, 1);           // the payload, in flight, is lost
        cut_done.count_down();
      });
}

}  // namespace
}  // namespace lockstep::p2p
