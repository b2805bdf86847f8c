// The reducer over real ProcessGroups, ranks as threads: averages, in-order launch, rebuild,
// unused parameters.
#include "ddp/reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>

#include "harness.h"
#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::ddp {
namespace {

using lockstep::testing::count_of;
using lockstep::testing::spawn_groups;
using testing::float_params;
using testing::VectorGrads;

// Rank r's gradient of parameter p at element i in iteration it: small integers.
float grad_value(int r, size_t p, size_t i, int it) {
  return static_cast<float>((r + 1) * (p + 1) + i % 7 + it);
}
// Their average over ranks 0..n-1.
double grad_average(int n, size_t p, size_t i, int it) {
  return (n + 1) / 2.0 * (p + 1) + i % 7 + it;
}

void fill(VectorGrads& g, const std::vector<ParamSpec>& params, int rank, int it) {
  for (size_t p = 0; p < params.size(); ++p) {
    g.grads[p].resize(params[p].count);
    for (size_t i = 0; i < params[p].count; ++i) g.grads[p][i] = grad_value(rank, p, i, it);
  }
}

// Small caps, so a handful of parameters make several buckets.
ReducerOptions small_buckets() {
  return {.sizes = {.first_bucket_bytes = 64, .bucket_bytes = 256}};
}

class ReducerWorld : public ::testing::TestWithParam<int> {};

TEST_P(ReducerWorld, AveragesGradientsArrivingInAnyOrderOverSeveralIterations) {
  const int world = GetParam();
  auto params = float_params({3, 17, 1, 40, 8, 64, 5, 30});
  spawn_groups(world, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    Reducer reducer(params, pg, grads, small_buckets());
    std::mt19937 rng(1234 + pg.rank());
    for (int it = 0; it < 4; ++it) {
      fill(grads, params, pg.rank(), it);
      std::vector<size_t> order(params.size());
      for (size_t p = 0; p < order.size(); ++p) order[p] = p;
      std::shuffle(order.begin(), order.end(), rng);
      reducer.begin_backward();
      for (size_t p : order) reducer.mark_ready(p);
      reducer.finalize();
      for (size_t p = 0; p < params.size(); ++p) {
        for (size_t i = 0; i < params[p].count; ++i) {
          ASSERT_NEAR(grads.grads[p][i], grad_average(world, p, i, it), 1e-5)
              << "rank " << pg.rank() << " iteration " << it << " p" << p << "[" << i << "]";
        }
      }
    }
    EXPECT_EQ(reducer.stats().iterations, 4);
    EXPECT_TRUE(reducer.unused_seen().empty());
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, ReducerWorld, ::testing::Values(1, 2, 3, 4));

// Wraps the average hook and records, at each launch, the bucket and which parameters were ready.
struct LaunchLog {
  std::vector<size_t> buckets;
  std::vector<std::vector<uint8_t>> ready_at_launch;
};

TEST(Reducer, LaunchesEachBucketOnceItIsFullAndOnlyAfterTheBucketsBeforeIt) {
  auto params = float_params({8, 8, 8, 8, 8, 8});  // 32 bytes each
  spawn_groups(2, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    LaunchLog log;
    std::vector<uint8_t> ready(params.size(), 0);
    auto average = average_hook(kGroupTimeout);
    ReducerOptions options{.sizes = {.first_bucket_bytes = 64, .bucket_bytes = 64},
                           .rebuild_buckets = false};
    options.hook = [&](ProcessGroup& g, const BucketRef& b) {
      log.buckets.push_back(b.index);
      log.ready_at_launch.push_back(ready);
      return average(g, b);
    };
    Reducer reducer(params, pg, grads, options);
    // Reverse registration order, two per bucket: bucket 0 = {p5, p4}, 1 = {p3, p2}, 2 = {p1, p0}.
    ASSERT_EQ(reducer.buckets().size(), 3u);
    ASSERT_EQ(reducer.buckets()[0].params, (std::vector<size_t>{5, 4}));
    fill(grads, params, pg.rank(), 0);
    reducer.begin_backward();
    auto mark = [&](size_t p) {
      ready[p] = 1;
      reducer.mark_ready(p);
    };
    mark(3);
    mark(2);  // bucket 1 is full but bucket 0 is not: nothing launches
    EXPECT_TRUE(log.buckets.empty());
    mark(5);
    EXPECT_TRUE(log.buckets.empty());
    mark(4);  // bucket 0 full: buckets 0 and 1 launch, in order, while "backward" goes on
    EXPECT_EQ(log.buckets, (std::vector<size_t>{0, 1}));
    mark(0);
    EXPECT_EQ(log.buckets.size(), 2u);
    mark(1);
    EXPECT_EQ(log.buckets, (std::vector<size_t>{0, 1, 2}));
    reducer.finalize();
    EXPECT_EQ(reducer.stats().early_launched, 3);
    for (size_t k = 0; k < log.buckets.size(); ++k) {
      for (size_t b = 0; b <= log.buckets[k]; ++b) {
        for (size_t p : reducer.buckets()[b].params) {
          EXPECT_TRUE(log.ready_at_launch[k][p])
              << "bucket " << log.buckets[k] << " launched before p" << p << " was ready";
        }
      }
    }
    EXPECT_NEAR(grads.grads[0][0], grad_average(2, 0, 0, 0), 1e-6);
  });
}

TEST(Reducer, RebuildsOnceInRankZerosArrivalOrderWithTheSameLayoutOnEveryRank) {
  auto params = float_params({8, 8, 8, 8, 8, 8});
  const int world = 3;
  std::mutex mu;
  std::vector<std::vector<BucketSpec>> layouts(world);
  spawn_groups(world, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    ReducerOptions options{.sizes = {.first_bucket_bytes = 64, .bucket_bytes = 64}};
    Reducer reducer(params, pg, grads, options);
    // Iteration 1: rank 0 produces gradients in registration order, the others in other orders.
    std::vector<size_t> order = {0, 1, 2, 3, 4, 5};
    if (pg.rank() == 1) order = {5, 3, 1, 4, 2, 0};
    if (pg.rank() == 2) order = {2, 5, 0, 4, 1, 3};
    for (int it = 0; it < 3; ++it) {
      fill(grads, params, pg.rank(), it);
      reducer.begin_backward();
      for (size_t p : order) reducer.mark_ready(p);
      reducer.finalize();
      // The averages survive the move to the new buckets: slots hold them after the rebuild.
      for (size_t p = 0; p < params.size(); ++p) {
        ASSERT_NEAR(grads.grads[p][3], grad_average(world, p, 3, it), 1e-5);
        ASSERT_NEAR(static_cast<float*>(reducer.slot(p).data)[3], grad_average(world, p, 3, it),
                    1e-5);
      }
      if (it == 0) std::reverse(order.begin(), order.end());  // later orders change nothing
    }
    EXPECT_EQ(reducer.stats().rebuilds, 1);
    EXPECT_EQ(grads.layout_changes, 1);
    std::lock_guard<std::mutex> lock(mu);
    layouts[pg.rank()] = reducer.buckets();
  });
  std::vector<size_t> rank0_order = {0, 1, 2, 3, 4, 5};
  auto expected =
      assign_buckets(params, rank0_order, {.first_bucket_bytes = 64, .bucket_bytes = 64});
  for (int r = 0; r < world; ++r) EXPECT_EQ(layouts[r], expected) << "rank " << r;
  EXPECT_EQ(expected[0].params, (std::vector<size_t>{0, 1}));
}

TEST(Reducer, UnusedParametersAreReducedAsZeroOrLeftUntouchedWhenNoRankUsedThem) {
  // p2 is unused on rank 1 only; p3 on every rank; p1 on rank 1 only in iteration 1.
  auto params = float_params({4, 4, 4, 4, 4});
  const int world = 3;
  spawn_groups(world, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    Reducer reducer(params, pg, grads, small_buckets());
    const std::vector<float> untouched(4, -42.0f);
    for (int it = 0; it < 3; ++it) {
      fill(grads, params, pg.rank(), it);
      grads.grads[3] = untouched;  // a stale gradient nobody produced this iteration
      if (pg.rank() == 1) grads.grads[2].clear();  // no gradient: reduced as zero
      reducer.begin_backward();
      for (size_t p = 0; p < params.size(); ++p) {
        bool unused = p == 3 || (p == 2 && pg.rank() == 1) || (p == 1 && pg.rank() == 1 && it == 1);
        if (!unused) reducer.mark_ready(p);
      }
      reducer.finalize();  // no hang
      double sum2 = 0;
      for (int r = 0; r < world; ++r) sum2 += r == 1 ? 0 : grad_value(r, 2, 0, it);
      EXPECT_NEAR(grads.grads[2][0], sum2 / world, 1e-5) << "rank " << pg.rank();
      // p1 on rank 1 in iteration 1: its current gradient (the one fill() set) is what it sends.
      EXPECT_NEAR(grads.grads[1][0], grad_average(world, 1, 0, it), 1e-5);
      EXPECT_EQ(grads.grads[3], untouched) << "rank " << pg.rank();
      EXPECT_NEAR(grads.grads[0][1], grad_average(world, 0, 1, it), 1e-5);
    }
    EXPECT_EQ(grads.writes[3], 0);
    EXPECT_EQ(grads.writes[2], 3);
    std::set<size_t> expected = {3};
    if (pg.rank() == 1) expected = {1, 2, 3};
    EXPECT_EQ(reducer.unused_seen(), expected);
  });
}

TEST(Reducer, NamesEachUnusedParameterOnceInAWarning) {
  std::vector<ParamSpec> params = {{"encoder.weight", 4, DType::f32},
                                   {"branch.extra_weight", 4, DType::f32},
                                   {"head.bias", 4, DType::f32}};
  ::testing::internal::CaptureStderr();
  spawn_groups(2, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    Reducer reducer(params, pg, grads, {.unused_advice = "ADVICE."});
    for (int it = 0; it < 4; ++it) {
      fill(grads, params, pg.rank(), it);
      reducer.begin_backward();
      reducer.mark_ready(0);
      if (pg.rank() == 0 || it == 2) reducer.mark_ready(1);  // rank 1 skips it, except once
      reducer.mark_ready(2);
      reducer.finalize();
    }
  });
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "'branch.extra_weight'"), 1u) << err;
  EXPECT_EQ(count_of(err, "on rank 1 of group"), 1u) << err;
  EXPECT_EQ(count_of(err, "backward pass #1"), 1u) << err;
  EXPECT_EQ(count_of(err, "ADVICE."), 1u) << err;
  EXPECT_EQ(count_of(err, "encoder.weight"), 0u) << err;
}

TEST(Reducer, EarlyUnusedMarkLaunchesBucketsAndALateGradientStillCountsUntilItsBucketIsSent) {
  auto params = float_params({8, 8, 8, 8});  // buckets {p3, p2}, {p1, p0}
  spawn_groups(2, [&](ProcessGroup& pg) {
    VectorGrads grads(params);
    Reducer reducer(
        params, pg, grads,
        {.sizes = {.first_bucket_bytes = 64, .bucket_bytes = 64}, .rebuild_buckets = false});
    fill(grads, params, pg.rank(), 0);
    reducer.begin_backward();
    std::vector<size_t> unused = {3, 0};
    reducer.mark_unused(unused);
    EXPECT_EQ(reducer.stats().buckets_launched, 0);
    reducer.mark_ready(2);  // bucket 0 = {p3 (unused), p2}: launches now
    EXPECT_EQ(reducer.stats().buckets_launched, 1);
    reducer.mark_ready(0);  // marked unused, but bucket 1 is not sent: its real gradient counts
    try {
      reducer.mark_ready(3);
      ADD_FAILURE() << "no error for a gradient after its bucket was sent";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("'p3' got a gradient on rank"), std::string::npos)
          << e.what();
    }
    try {
      reducer.mark_ready(2);
      ADD_FAILURE() << "no error for a second gradient";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("'p2' got a gradient twice"), std::string::npos)
          << e.what();
    }
    reducer.mark_ready(1);
    reducer.finalize();
    EXPECT_NEAR(grads.grads[0][0], grad_average(2, 0, 0, 0), 1e-6);
    EXPECT_NEAR(grads.grads[1][0], grad_average(2, 1, 0, 0), 1e-6);
    // p3 was sent as its current gradient (fill() set one) on both ranks, but no rank "used" it.
    EXPECT_EQ(grads.writes[3], 0);
    EXPECT_EQ(reducer.stats().early_launched, 2);
  });
}

TEST(Reducer, MixedDtypeBucketsAverageEach) {
  std::vector<ParamSpec> params = {{"w", 6, DType::f64}, {"b", 3, DType::f32}};
  spawn_groups(3, [&](ProcessGroup& pg) {
    struct Access : GradientAccess {
      std::vector<double> w = std::vector<double>(6);
      std::vector<float> b = std::vector<float>(3);
      void read_gradient(size_t p, BufferView slot) override {
        std::memcpy(slot.data, p == 0 ? static_cast<void*>(w.data()) : b.data(), slot.bytes());
      }
      void write_gradient(size_t p, BufferView slot) override {
        std::memcpy(p == 0 ? static_cast<void*>(w.data()) : b.data(), slot.data, slot.bytes());
      }
    } access;
    for (int i = 0; i < 6; ++i) access.w[i] = 1e-9 * (pg.rank() + 1) * (i + 1);
    for (int i = 0; i < 3; ++i) access.b[i] = static_cast<float>(pg.rank() * 3 + i);
    Reducer reducer(params, pg, access, {});
    ASSERT_EQ(reducer.buckets().size(), 2u);
    reducer.begin_backward();
    reducer.mark_ready(1);
    reducer.mark_ready(0);
    reducer.finalize();
    for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(access.w[i], 2e-9 * (i + 1));
    for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(access.b[i], 3.0f + i);
  });
}

}  // namespace
}  // namespace lockstep::ddp
