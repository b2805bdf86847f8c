// How the mpi backend fails: init without MASTER_ADDR, ranks that disagree about a collective
// (MismatchError on every rank, before any data moves), send/recv that disagree on the size
// (MismatchError, output untouched) or the tag (named at the deadline), a recv that times out, a
// failed peer reaching a rank that waits on it at once, counts beyond MPI's int, and a group that
// is not MPI_COMM_WORLD's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "backends/mpi/collectives.h"
#include "group/closed_forms.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "support/messages.h"
#include "world.h"

namespace lockstep::testing {
namespace {

using std::chrono::seconds;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<int> all_ranks() {
  std::vector<int> r(static_cast<size_t>(world().size()));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

TEST(MpiErrors, InitFindsTheStoreThroughMpi) {
  ASSERT_EQ(std::getenv("MASTER_ADDR"), nullptr) << "run under mpirun without MASTER_ADDR";
  EXPECT_EQ(world().backend_name(), "mpi");
  EXPECT_EQ(world().rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_EQ(world().size(), std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
}

TEST(MpiErrors, CountMismatchFailsOnEveryRankAndBreaksTheGroup) {
  auto sub = world().new_group(all_ranks());
  const size_t count = world().rank() == 0 ? 10 : 20;
  TypedBuffer buf(DType::f32, count);
  buf.fill([](size_t) { return 1; });
  const auto start = Clock::now();
  std::string m = message_of<MismatchError>([&] { sub->all_reduce(buf.view())->wait(); });
  EXPECT_LT(seconds_since(start), 10);
  for (const char* part :
       {"all_reduce #0 (f32, sum, 40 bytes)", "all_reduce #0 (f32, sum, 80 bytes)",
        "the byte count differs", "same order"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " missing from: " << m;
  check_elements(
      buf, [](size_t) { return 1; }, "all_reduce output after a mismatch");
  std::string later = message_of<MismatchError>([&] { sub->barrier()->wait(); });
  EXPECT_NE(later.find("the byte count differs"), std::string::npos) << later;
}

// Rank 0's all_reduce is small enough to travel in the agreement blocks, the others' is not: the
// blocks still agree on their format, and every rank fails on the descriptors with its output
// untouched.
TEST(MpiErrors, CountMismatchAcrossThePiggybackLimit) {
  auto sub = world().new_group(all_ranks());
  const size_t count = world().rank() == 0 ? 16 : 5000;
  TypedBuffer buf(DType::f32, count);
  buf.fill([](size_t) { return 2; });
  std::string m = message_of<MismatchError>([&] { sub->all_reduce(buf.view())->wait(); });
  for (const char* part : {"all_reduce #0 (f32, sum, 64 bytes)",
                           "all_reduce #0 (f32, sum, 20000 bytes)", "the byte count differs"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " missing from: " << m;
  check_elements(
      buf, [](size_t) { return 2; }, "all_reduce output after a mismatch");
}

// Rank 1 comes to an all_reduce after the others' deadline: they fail naming it (no agreement
// block came from it). Its late call then completes their blocks' receives, so no request is left.
TEST(MpiErrors, ARankThatIsLateIsNamedAtTheDeadline) {
  auto sub = world().new_group(all_ranks());
  TypedBuffer buf(DType::f32, 4);
  if (world().rank() != 1) {
    const auto start = Clock::now();
    std::string m = message_of<TimeoutError>(
        [&] { sub->all_reduce(buf.view(), {.timeout = std::chrono::milliseconds(800)})->wait(); });
    EXPECT_GE(seconds_since(start), 0.7);
    EXPECT_LT(seconds_since(start), 10);
    for (const char* part : {"all_reduce #0", "timed out: rank 1 has not reached it",
                             "no agreement block came from it"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " missing from: " << m;
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    try {
      sub->all_reduce(buf.view(), {.timeout = std::chrono::milliseconds(5000)})->wait();
    } catch (const Error&) {
      // the others' abort note may reach it first
    }
  }
  world().barrier()->wait();
}

TEST(MpiErrors, OpAndRootMismatch) {
  auto sub = world().new_group(all_ranks());
  TypedBuffer buf(DType::i32, 4);
  std::string m = message_of<MismatchError>([&] {
    if (world().rank() == 0)
      sub->broadcast(buf.view(), {.root = 0})->wait();
    else
      sub->all_reduce(buf.view())->wait();
  });
  EXPECT_NE(m.find("broadcast #0 (i32, root 0, 16 bytes)"), std::string::npos) << m;
  EXPECT_NE(m.find("all_reduce #0 (i32, sum, 16 bytes)"), std::string::npos) << m;
  auto other = world().new_group(all_ranks());
  m = message_of<MismatchError>([&] {
    other->broadcast(buf.view(), {.root = world().rank() == 0 ? 1 % world().size() : 0})->wait();
  });
  EXPECT_NE(m.find("the root differs"), std::string::npos) << m;
}

TEST(MpiErrors, AllToAllVPairMismatch) {
  auto sub = world().new_group(all_ranks());
  const size_t n = static_cast<size_t>(world().size());
  std::vector<size_t> send(n, 1), recv(n, 1);
  if (world().rank() == 0) send[1] = 2;
  TypedBuffer in(DType::u8, n + (world().rank() == 0)), out(DType::u8, n);
  std::string m = message_of<MismatchError>(
      [&] { sub->all_to_all_v(in.view(), send, out.view(), recv)->wait(); });
  EXPECT_NE(m.find("rank 0 sends 2 elements to rank 1, but rank 1 expects 1"), std::string::npos)
      << m;
}

// Ranks 0 and 1 in their own group; the others only take part in creating it.
std::shared_ptr<ProcessGroup> pair_group() {
  return world().new_group({0, 1});
}

// Sends and recvs go through the p2p engine over MPI (src/p2p/engine.h): a size mismatch fails
// the recv at once naming both sides; a tag mismatch is named at the recv's deadline.
TEST(MpiErrors, RecvTagAndSizeMismatch) {
  auto pair = pair_group();
  if (pair) {
    TypedBuffer out(DType::f32, 8), in(DType::f32, 4);
    out.fill([](size_t i) { return static_cast<double>(i); });
    in.fill([](size_t) { return -1; });
    if (pair->rank() == 0) {
      pair->send(out.view(), 1, {.tag = 3})->wait();  // 32 bytes: eager, done once sent
      pair->send(out.view(), 1, {.tag = 3})->wait();
    } else {
      std::string m =
          message_of<MismatchError>([&] { pair->recv(in.view(), 0, {.tag = 3})->wait(); });
      EXPECT_NE(m.find("rank 1's recv #0 from rank 0 (tag 3) expects f32 x 4 (16 bytes), but the "
                       "send of rank 0 it matched (tag 3) carries f32 x 8 (32 bytes)"),
                std::string::npos)
          << m;
      check_elements(
          in, [](size_t) { return -1; }, "recv output after a mismatch");
      m = message_of<TimeoutError>([&] {
        pair->recv(in.view(), 0, {.tag = 4, .timeout = std::chrono::milliseconds(800)})->wait();
      });
      EXPECT_NE(m.find("recv #1 from rank 0 (tag 4, f32 x 4)"), std::string::npos) << m;
      EXPECT_NE(m.find("the messages rank 0 sent it carry tag 3"), std::string::npos) << m;
    }
    pair->barrier()->wait();
  }
  world().barrier()->wait();
}

TEST(MpiErrors, RecvTimesOut) {
  auto pair = pair_group();
  if (pair && pair->rank() == 1) {
    TypedBuffer in(DType::f64, 2);
    const auto start = Clock::now();
    std::string m = message_of<TimeoutError>(
        [&] { pair->recv(in.view(), 0, {.timeout = std::chrono::milliseconds(800)})->wait(); });
    const double took = seconds_since(start);
    EXPECT_GE(took, 0.7);
    EXPECT_LT(took, 10);
    EXPECT_NE(m.find("recv #0 from rank 0"), std::string::npos) << m;
    EXPECT_NE(m.find("timed out"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0 has posted no send to rank 1"), std::string::npos) << m;
  }
  if (pair) pair->barrier()->wait();
  world().barrier()->wait();
}

// A rank whose group is destroyed by an exception: its peer, waiting for it, fails at once.
TEST(MpiErrors, PeerThatFailsReachesAWaitingRankFast) {
  if (world().rank() == 1) {
    try {
      auto pair = pair_group();
      throw std::runtime_error("rank 1 fails");
    } catch (const std::runtime_error&) {
    }
  } else if (world().rank() == 0) {
    auto pair = pair_group();
    TypedBuffer buf(DType::i32, 3);
    const auto start = Clock::now();
    std::string m = message_of<NetworkError>([&] { pair->recv(buf.view(), 1)->wait(); });
    EXPECT_LT(seconds_since(start), 5);
    EXPECT_NE(m.find("recv #0 from rank 1: rank 1 left the group: rank 1's process group was "
                     "destroyed while an exception propagated"),
              std::string::npos)
        << m;
  } else {
    (void)pair_group();
  }
  world().barrier()->wait();
}

TEST(MpiErrors, CountsBeyondIntAreRejected) {
  const Op op{.kind = OpKind::all_gather, .variable = true, .dtype = DType::u8};
  std::string m =
      message_of<InvalidArgument>([&] { mpi::mpi_count(size_t{1} << 31, op, "a count"); });
  EXPECT_NE(m.find("2147483647"), std::string::npos) << m;
  EXPECT_EQ(mpi::mpi_count(123, op, "a count"), 123);
}

TEST(MpiErrors, ArgumentErrorsAreRaisedByTheCallAndLeaveTheGroupUsable) {
  TypedBuffer buf(DType::f32, 4);
  if (world().rank() == 0) {
    // Refused by the call, before a number is taken. (Tags are not MPI tags any more: the p2p
    // engine carries them in its own frames, so every 32-bit tag is valid.)
    std::string m =
        message_of<InvalidArgument>([&] { (void)world().send(buf.view(), world().size()); });
    EXPECT_NE(m.find("destination"), std::string::npos) << m;
  }
  std::vector<float> x(10, static_cast<float>(world().rank()));
  world().all_reduce(view(x))->wait();
  const float sum = static_cast<float>(world().size() * (world().size() - 1) / 2);
  for (float v : x) EXPECT_EQ(v, sum) << where(world());
  world().barrier()->wait();
}

TEST(MpiErrors, GroupOutsideMpiCommWorldIsAConfigError) {
  // Every process claims to be rank 0 of a one-rank job: only MPI's rank 0 really is.
  auto solo = [] {
    return init_process_group({.backend = "mpi",
                               .rank = 0,
                               .world_size = 1,
                               .store = std::make_shared<HashStore>(),
                               .group_name = "solo"});
  };
  if (world().rank() == 0) {
    EXPECT_EQ(solo()->size(), 1);
  } else {
    std::string m = message_of<ConfigError>(solo);
    EXPECT_NE(
        m.find("this process is rank " + std::to_string(world().rank()) + " of MPI_COMM_WORLD"),
        std::string::npos)
        << m;
    EXPECT_NE(m.find("mpirun"), std::string::npos) << m;
  }
  world().barrier()->wait();
}

}  // namespace
}  // namespace lockstep::testing
