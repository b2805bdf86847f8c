// Fingerprints (LOCKSTEP_DEBUG=DETAIL): the normal form, the encoding, the comparison's exact
// messages, and the check over real tcp and shm backends with ranks as threads (the exchange
// must not deadlock when sizes differ, and every rank must raise the same error).
#include "debug/fingerprint.h"

#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "debug/fingerprint_check.h"
#include "group/backend_registry.h"
#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::debug {
namespace {

Op all_reduce(size_t count, uint64_t seq = 12, DType dtype = DType::f32,
              ReduceOp op = ReduceOp::sum) {
  return Op{
      .kind = OpKind::all_reduce, .seq = seq, .dtype = dtype, .reduce_op = op, .count = count};
}

Op gather_like(OpKind kind, std::vector<size_t> counts, bool variable, int root = 0) {
  return Op{.kind = kind,
            .variable = variable,
            .seq = 3,
            .dtype = DType::i32,
            .root = root,
            .counts = std::move(counts)};
}

Op all_to_all_v(std::vector<size_t> send, std::vector<size_t> recv) {
  return Op{.kind = OpKind::all_to_all,
            .variable = true,
            .seq = 4,
            .dtype = DType::f64,
            .counts = std::move(send),
            .recv_counts = std::move(recv)};
}

std::optional<std::string> mismatch_of(const std::vector<Op>& ops) {
  std::vector<Fingerprint> all;
  for (const Op& op : ops) all.push_back(decode(encode(fingerprint_of(op))));
  return fingerprint_mismatch(all);
}

TEST(Fingerprint, FieldsThatDoNotApplyAreZeroSoTheyNeverDiffer) {
  Op a = all_reduce(10), b = all_reduce(10);
  b.root = 3;  // an all_reduce has no root
  EXPECT_EQ(fingerprint_of(a), fingerprint_of(b));
  Op bc{.kind = OpKind::broadcast, .seq = 1, .reduce_op = ReduceOp::max, .root = 1, .count = 5};
  EXPECT_EQ(fingerprint_of(bc).reduce_op, ReduceOp::sum) << "a broadcast has no reduce op";
  EXPECT_EQ(fingerprint_of(bc).root, 1);
  Op barrier{.kind = OpKind::barrier, .seq = 2, .dtype = DType::f64};
  EXPECT_EQ(call_text(fingerprint_of(barrier)), "barrier()");
  EXPECT_FALSE(is_fingerprinted(OpKind::send));
  EXPECT_FALSE(is_fingerprinted(OpKind::recv));
}

TEST(Fingerprint, UniformOpsKeepTheirPerRankCountAndVariantsTheWholeArray) {
  auto uniform = fingerprint_of(gather_like(OpKind::all_gather, {7, 7, 7}, false));
  EXPECT_EQ(uniform.counts, std::vector<uint64_t>{7});
  EXPECT_EQ(call_text(uniform), "all_gather(i32, count 7 per rank)");
  auto v = fingerprint_of(gather_like(OpKind::gather, {1, 2, 3}, true, 2));
  EXPECT_EQ(v.counts, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(call_text(v), "gather_v(i32, counts [1, 2, 3], root 2)");
  std::vector<size_t> many(12, 5);
  EXPECT_EQ(call_text(fingerprint_of(gather_like(OpKind::all_gather, many, true))),
            "all_gather_v(i32, counts [5, 5, 5, 5, 5, 5, 5, 5, ... (12 entries)])");
  EXPECT_EQ(call_text(fingerprint_of(all_to_all_v({1, 2}, {3, 4}))),
            "all_to_all_v(f64, send counts [1, 2], recv counts [3, 4])");
}

TEST(Fingerprint, EncodingRoundTripsAndRejectsOtherBytes) {
  for (const Op& op : {all_reduce(1000), gather_like(OpKind::scatter, {4, 5}, true, 1),
                       all_to_all_v({1, 2, 3}, {4, 5, 6}), Op{.kind = OpKind::barrier}}) {
    Fingerprint f = fingerprint_of(op);
    EXPECT_EQ(decode(encode(f)), f) << call_text(f);
  }
  Op tagged = all_reduce(8);
  tagged.tag = 9;
  tagged.algorithm = Algorithm::ring;
  EXPECT_EQ(call_text(decode(encode(fingerprint_of(tagged)))),
            "all_reduce(f32, count 8, sum, tag 9, algorithm ring)");
  // Too short for the 32-byte head, and a head of the right size without the magic number.
  testing::expect_error_naming<Error>([] { decode("not a fingerprint"); },
                                      {"fingerprint check: a 17-byte value is not a fingerprint"});
  testing::expect_error_naming<Error>(
      [] { decode(std::string(40, '\0')); },
      {"fingerprint check: a value in the store is not a fingerprint (another program uses the "
       "same store keys?)"});
}

TEST(FingerprintMismatch, AgreeingCallsPass) {
  EXPECT_FALSE(mismatch_of({all_reduce(1000), all_reduce(1000), all_reduce(1000)}));
  EXPECT_FALSE(mismatch_of({all_reduce(5)}));
}

TEST(FingerprintMismatch, CountNamesEachRanksCall) {
  EXPECT_EQ(mismatch_of({all_reduce(1000), all_reduce(999)}).value_or(""),
            "all_reduce #12: ranks disagree on count: rank 0: all_reduce(f32, count 1000, sum); "
            "rank 1: all_reduce(f32, count 999, sum). Fix: make every rank pass the same count");
}

TEST(FingerprintMismatch, RanksWithTheSameCallAreGroupedAsRanges) {
  std::vector<Op> ops(7, all_reduce(64));
  ops[1] = all_reduce(63);
  ops[6] = all_reduce(63);
  auto m = mismatch_of(ops).value_or("");
  EXPECT_NE(m.find("ranks 0, 2-5: all_reduce(f32, count 64, sum); ranks 1, 6: all_reduce(f32, "
                   "count 63, sum)"),
            std::string::npos)
      << m;
}

TEST(FingerprintMismatch, EveryDifferingFieldIsNamedWithItsFix) {
  auto m = mismatch_of({all_reduce(8, 5, DType::f32, ReduceOp::sum),
                        all_reduce(8, 5, DType::f64, ReduceOp::max)})
               .value_or("");
  EXPECT_EQ(
      m,
      "all_reduce #5: ranks disagree on dtype and reduce op: rank 0: all_reduce(f32, count 8, "
      "sum); rank 1: all_reduce(f64, count 8, max). Fix: pass the same dtype on every rank; "
      "and pass the same ReduceOp on every rank");
  auto root = mismatch_of({gather_like(OpKind::gather, {2, 2}, false, 0),
                           gather_like(OpKind::gather, {2, 2}, false, 1)})
                  .value_or("");
  EXPECT_NE(root.find("gather #3: ranks disagree on root: rank 0: gather(i32, count 2 per rank, "
                      "root 0); rank 1: gather(i32, count 2 per rank, root 1)"),
            std::string::npos)
      << root;
}

TEST(FingerprintMismatch, VariantCountsArraysAreShownPerRank) {
  auto m = mismatch_of({gather_like(OpKind::all_gather, {1, 2}, true),
                        gather_like(OpKind::all_gather, {1, 3}, true)})
               .value_or("");
  EXPECT_EQ(m,
            "all_gather_v #3: ranks disagree on counts: rank 0: all_gather_v(i32, counts [1, 2]); "
            "rank 1: all_gather_v(i32, counts [1, 3]). Fix: every rank must pass the same counts "
            "array to all_gather_v");
  auto uniform = mismatch_of({gather_like(OpKind::reduce_scatter, {4, 4}, false),
                              gather_like(OpKind::reduce_scatter, {5, 5}, false)})
                     .value_or("");
  EXPECT_NE(uniform.find("or use reduce_scatter_v for uneven data"), std::string::npos) << uniform;
}

TEST(FingerprintMismatch, DifferentOpsNameTheRankOutOfStep) {
  Op barrier{.kind = OpKind::barrier, .seq = 12};
  EXPECT_EQ(mismatch_of({all_reduce(4), barrier, all_reduce(4)}).value_or(""),
            "collective #12: ranks called different collectives: ranks 0, 2: all_reduce(f32, "
            "count 4, sum); rank 1: barrier(). rank 1 is out of step with the others: a rank "
            "skipped a collective, added one, or issued them in another order. Fix: every rank "
            "must issue the same collectives in the same order (look for a collective under a "
            "rank-dependent branch or loop)");
  // Two ranks: no majority, so nobody is singled out; both calls are shown.
  auto two = mismatch_of({all_reduce(4), barrier}).value_or("");
  EXPECT_NE(two.find("rank 0: all_reduce(f32, count 4, sum); rank 1: barrier(). a rank skipped"),
            std::string::npos)
      << two;
  Op v = gather_like(OpKind::all_gather, {4, 4}, true);
  Op u = gather_like(OpKind::all_gather, {4, 4}, false);
  EXPECT_NE(mismatch_of({v, u}).value_or("").find("ranks called different collectives"),
            std::string::npos)
      << "all_gather_v against all_gather";
}

TEST(FingerprintMismatch, AllToAllVChecksEveryPair) {
  // Consistent: rank i's send[j] == rank j's recv[i], though the ranks' arrays differ.
  EXPECT_FALSE(mismatch_of({all_to_all_v({1, 2}, {1, 3}), all_to_all_v({3, 4}, {2, 4})}));
  auto m = mismatch_of({all_to_all_v({1, 2}, {1, 3}), all_to_all_v({5, 4}, {2, 4})}).value_or("");
  EXPECT_NE(m.find("all_to_all_v #4: ranks disagree on send/recv counts"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 1 sends 5 to rank 0, which expects 3"), std::string::npos) << m;
  EXPECT_EQ(m.find("rank 0 sends"), std::string::npos) << "only the bad pair is named: " << m;
}

// ---- the check over real backends, ranks as threads ----

struct Rank {
  std::unique_ptr<Backend> backend;
  GroupConfig config;
};

// Runs fn(rank, backend) on `size` threads, each with a fingerprint-checked `backend_name`
// backend of one group over a shared HashStore.
void spawn_checked(int size, const std::string& backend_name,
                   const std::function<void(int, Backend&)>& fn,
                   std::optional<FingerprintRoute> route = std::nullopt) {
  auto store = std::make_shared<HashStore>();
  static int groups = 0;
  std::string name = "fp" + std::to_string(groups++);
  testing::spawn(size, [&](int rank) {
    GroupConfig config{.name = name,
                       .rank = rank,
                       .size = size,
                       .store = store,
                       .backend = backend_name,
                       .timeout = std::chrono::seconds(30),
                       .advertise_address = "127.0.0.1",
                       .hostname = "localhost"};
    auto backend = route ? with_fingerprints(create_backend(config), config, *route)
                         : with_fingerprints(create_backend(config), config);
    fn(rank, *backend);
    backend->shutdown(Deadline::after(std::chrono::seconds(10)));
  });
}

// `rounds` all_reduces of 3 ranks that agree: each rank adds rank + 1, so every element is 6.
void run_agreeing_all_reduces(int rank, Backend& backend, uint64_t rounds) {
  for (uint64_t seq = 0; seq < rounds; ++seq) {
    std::vector<float> x(100, static_cast<float>(rank + 1));
    Op op{.kind = OpKind::all_reduce,
          .seq = seq,
          .input = x.data(),
          .output = x.data(),
          .count = x.size(),
          .deadline = Deadline::after(std::chrono::seconds(30))};
    backend.run(op);
    for (float v : x) ASSERT_EQ(v, 6.0f);
  }
}

class FingerprintCheckBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(FingerprintCheckBackends, AgreeingCallsRunAndGiveTheClosedForm) {
  spawn_checked(3, GetParam(), [](int rank, Backend& backend) {
    run_agreeing_all_reduces(rank, backend, 5);
    // Uneven all_to_all_v: rank i sends sends[i][j] elements to rank j. Element e of rank i's
    // input is 100 i + e, so each received element names its sender and position.
    const std::vector<std::vector<size_t>> sends = {{0, 1, 2}, {1, 1, 2}, {2, 1, 2}};
    const auto me = static_cast<size_t>(rank);
    std::vector<size_t> recv(3);
    for (size_t i = 0; i < 3; ++i) recv[i] = sends[i][me];
    std::vector<double> in(3 + me), out(recv[0] + recv[1] + recv[2], -1.0);
    for (size_t e = 0; e < in.size(); ++e) in[e] = 100.0 * static_cast<double>(me) + e;
    Op a2a{.kind = OpKind::all_to_all,
           .variable = true,
           .seq = 5,
           .dtype = DType::f64,
           .input = in.data(),
           .output = out.data(),
           .counts = sends[me],
           .recv_counts = recv,
           .deadline = Deadline::after(std::chrono::seconds(30))};
    backend.run(a2a);
    // Closed form: from each rank i in order, the sends[i][me] elements that follow, in i's
    // input, its blocks for ranks 0 .. me-1.
    std::vector<double> want;
    for (size_t i = 0; i < 3; ++i) {
      size_t offset = 0;
      for (size_t j = 0; j < me; ++j) offset += sends[i][j];
      for (size_t e = 0; e < sends[i][me]; ++e) want.push_back(100.0 * i + offset + e);
    }
    EXPECT_EQ(out, want) << "all_to_all_v on rank " << rank;
  });
}

// A 3-rank all_reduce where rank 2 passes 999 elements and the others 1000: every rank's
// MismatchError text (each rank aborts its backend on it, so that no rank waits).
std::vector<std::string> count_mismatch_errors(const std::string& backend_name,
                                               std::optional<FingerprintRoute> route) {
  std::mutex mu;
  std::vector<std::string> errors(3);
  EXPECT_THROW(spawn_checked(
                   3, backend_name,
                   [&](int rank, Backend& backend) {
                     std::vector<float> x(rank == 2 ? 999 : 1000, 1.0f);
                     Op op{.kind = OpKind::all_reduce,
                           .seq = 0,
                           .input = x.data(),
                           .output = x.data(),
                           .count = x.size(),
                           .deadline = Deadline::after(std::chrono::seconds(30))};
                     try {
                       backend.run(op);
                     } catch (const MismatchError& e) {
                       std::lock_guard<std::mutex> lock(mu);
                       errors[static_cast<size_t>(rank)] = e.what();
                       backend.abort(e.what());
                       throw;
                     }
                   },
                   route),
               MismatchError);
  return errors;
}

constexpr const char* kCountMismatch =
    "all_reduce #0: ranks disagree on count: ranks 0, 1: all_reduce(f32, count 1000, sum); "
    "rank 2: all_reduce(f32, count 999, sum). Fix: make every rank pass the same count";

TEST_P(FingerprintCheckBackends, CountMismatchRaisesTheSameErrorOnEveryRankWithoutDeadlock) {
  auto started = Clock::now();
  const auto errors = count_mismatch_errors(GetParam(), std::nullopt);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 20.0);
  for (const auto& e : errors) EXPECT_EQ(e, kCountMismatch);
}

INSTANTIATE_TEST_SUITE_P(Backends, FingerprintCheckBackends, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

// The store route, which a backend that moves device memory only (nccl) gets: the same checks
// with the fingerprints in the group's store, here under a tcp group forced onto it.
TEST(FingerprintStoreRoute, BackendsThatMoveHostMemoryTakeTheBackendRoute) {
  auto store = std::make_shared<HashStore>();
  GroupConfig config{.name = "route",
                     .rank = 0,
                     .size = 1,
                     .store = store,
                     .backend = "tcp",
                     .timeout = std::chrono::seconds(10),
                     .advertise_address = "127.0.0.1",
                     .hostname = "localhost"};
  auto backend = create_backend(config);
  EXPECT_EQ(fingerprint_route(*backend), FingerprintRoute::backend);
}

TEST(FingerprintStoreRoute, AgreeingCallsRun) {
  spawn_checked(
      3, "tcp", [](int rank, Backend& backend) { run_agreeing_all_reduces(rank, backend, 6); },
      FingerprintRoute::store);
}

TEST(FingerprintStoreRoute, CountMismatchRaisesTheSameErrorOnEveryRank) {
  for (const auto& e : count_mismatch_errors("tcp", FingerprintRoute::store))
    EXPECT_EQ(e, kCountMismatch);
}

TEST(FingerprintStoreRoute, ARankThatNeverArrivesIsNamedAtTheDeadline) {
  auto store = std::make_shared<HashStore>();
  GroupConfig config{.name = "late",
                     .rank = 0,
                     .size = 2,
                     .store = store,
                     .backend = "tcp",
                     .timeout = std::chrono::seconds(10),
                     .advertise_address = "127.0.0.1",
                     .hostname = "localhost"};
  // The store route never touches the transport: a backend of size 1 stands in for it.
  GroupConfig solo = config;
  solo.size = 1;
  solo.name = "late-solo";
  auto transport = create_backend(solo);
  FingerprintCheck check(*transport, store, FingerprintRoute::store, "late", 0, 2);
  std::vector<float> x(4, 1.0f);
  Op op{.kind = OpKind::all_reduce,
        .seq = 0,
        .input = x.data(),
        .output = x.data(),
        .count = x.size(),
        .deadline = Deadline::after(std::chrono::milliseconds(300))};
  try {
    check.check(op);
    FAIL() << "expected TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks [1] of group 'late' never posted their "
                                         "fingerprint"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce #0 (in the LOCKSTEP_DEBUG=DETAIL "
                                         "fingerprint exchange"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockstep::debug
