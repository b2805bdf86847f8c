#include "ddp/bucket_plan.h"

#include <gtest/gtest.h>

#include "harness.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::ddp {
namespace {

using testing::float_params;

TEST(BucketPlan, ReverseOrderFillsFirstBucketToItsCapThenLaterOnesToTheirs) {
  // Bytes: 40 40 40 40 120 20. Reverse order: p5(20) p4(120) p3 p2 p1 p0 (40 each).
  auto params = float_params({10, 10, 10, 10, 30, 5});
  auto buckets =
      assign_buckets(params, reverse_order(6), {.first_bucket_bytes = 100, .bucket_bytes = 200});
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{5}));        // p4 would make 140 > 100
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{4, 3, 2}));  // 120+40+40 = 200: fits exactly
  EXPECT_EQ(buckets[1].offsets, (std::vector<size_t>{0, 30, 40}));
  EXPECT_EQ(buckets[1].count, 50u);
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(buckets[2].offsets, (std::vector<size_t>{0, 10}));
}

TEST(BucketPlan, ParameterLargerThanTheCapGetsABucketOfItsOwn) {
  auto params = float_params({4, 1000, 4});
  auto buckets =
      assign_buckets(params, reverse_order(3), {.first_bucket_bytes = 64, .bucket_bytes = 64});
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{2}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{1}));
  EXPECT_EQ(buckets[1].bytes(), 4000u);
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{0}));
}

TEST(BucketPlan, DefaultCapsOnTheOverlapMlp) {
  // 784-4096-4096-10: fc1.weight fc1.bias fc2.weight fc2.bias fc3.weight fc3.bias.
  auto params = float_params({4096 * 784, 4096, 4096 * 4096, 4096, 10 * 4096, 10});
  auto buckets = assign_buckets(params, reverse_order(6), BucketSizes{});
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{5, 4, 3}));  // 176 KiB, under 1 MiB
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{2}));        // 64 MiB, alone
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{1, 0}));     // 12.3 MiB, under 25 MiB
}

TEST(BucketPlan, DtypesGetSeparateBucketsOrderedByFirstArrival) {
  std::vector<ParamSpec> params = {
      {"a", 4, DType::f32}, {"b", 4, DType::f64}, {"c", 4, DType::f32}, {"d", 4, DType::f64}};
  std::vector<size_t> order = {1, 0, 3, 2};
  auto buckets = assign_buckets(params, order, {.first_bucket_bytes = 1024, .bucket_bytes = 1024});
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].dtype, DType::f64);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{1, 3}));
  EXPECT_EQ(buckets[1].dtype, DType::f32);
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{0, 2}));
}

TEST(BucketPlan, EveryParameterLandsInExactlyOneBucketWithContiguousOffsets) {
  std::vector<size_t> counts;
  for (size_t i = 0; i < 37; ++i) counts.push_back(1 + (i * 7919) % 300);
  auto params = float_params(counts);
  auto buckets = assign_buckets(params, reverse_order(counts.size()),
                                {.first_bucket_bytes = 256, .bucket_bytes = 1000});
  std::vector<int> seen(counts.size(), 0);
  for (size_t b = 0; b < buckets.size(); ++b) {
    size_t next = 0;
    for (size_t i = 0; i < buckets[b].params.size(); ++i) {
      seen[buckets[b].params[i]] += 1;
      EXPECT_EQ(buckets[b].offsets[i], next);
      next += counts[buckets[b].params[i]];
    }
    EXPECT_EQ(buckets[b].count, next);
    size_t cap = b == 0 ? 256 : 1000;
    if (buckets[b].params.size() > 1) {
      EXPECT_LE(buckets[b].bytes(), cap) << "bucket " << b;
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(BucketPlan, RejectsAnOrderThatIsNotAPermutation) {
  auto params = float_params({1, 1, 1});
  std::vector<size_t> twice = {0, 1, 1};
  try {
    assign_buckets(params, twice, {});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("lists parameter 1 twice"), std::string::npos) << e.what();
  }
  std::vector<size_t> short_order = {0, 1};
  lockstep::testing::expect_error_naming<InvalidArgument>(
      [&] { assign_buckets(params, short_order, {}); },
      {"DDP bucket assignment: the order has 2 entries for 3 parameters"});
}

}  // namespace
}  // namespace lockstep::ddp
