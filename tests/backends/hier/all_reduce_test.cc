// The hierarchical all_reduce with ranks as threads on simulated hosts (LOCKSTEP_HOST_ID): closed
// forms for every dtype and reduce op over several host layouts (2x2, 3+1, interleaved, 3+2),
// counts that no rank count divides, and buffers large enough to pipeline both the shm chunks and
// the tcp ring segments; in place and out of place.
#include <gtest/gtest.h>

#include "group/closed_forms.h"
#include "hier_test_util.h"

namespace lockstep::testing {
namespace {

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kInts[] = {DType::i32, DType::i64, DType::u8, DType::i8};
constexpr ReduceOp kArithmetic[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min,
                                    ReduceOp::max};
constexpr ReduceOp kBitwise[] = {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};

struct Case {
  DType dtype;
  ReduceOp op;
  size_t count;
  bool in_place = true;
};

std::string describe(const Case& c) {
  return detail::concat(dtype_name(c.dtype), " ", reduce_op_name(c.op), " x ", c.count,
                        c.in_place ? " in place" : " out of place");
}

// Runs c on pg and checks every element against the closed form.
void check_case(ProcessGroup& pg, const Case& c) {
  const int me = pg.rank(), n = pg.size();
  TypedBuffer input(c.dtype, c.count), output(c.dtype, c.count);
  input.fill([&](size_t i) { return reduce_input(c.op, me, i); });
  TypedBuffer& result = c.in_place ? input : output;
  if (c.in_place)
    pg.all_reduce(input.view(), {.op = c.op})->wait();
  else
    pg.all_reduce(input.view(), output.view(), {.op = c.op})->wait();
  check_elements(
      result, [&](size_t i) { return reduce_expected(c.op, c.dtype, n, i); },
      detail::concat("rank ", me, ": ", describe(c)));
  if (!c.in_place)
    check_elements(
        input, [&](size_t i) { return reduce_input(c.op, me, i); },
        detail::concat("rank ", me, ": input of ", describe(c), " changed"));
}

std::vector<Case> matrix() {
  std::vector<Case> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{65539}}) {
    for (DType t : kFloats)
      for (ReduceOp op : kArithmetic) cases.push_back({t, op, count});
    for (DType t : kInts) {
      for (ReduceOp op : kArithmetic) cases.push_back({t, op, count});
      for (ReduceOp op : kBitwise) cases.push_back({t, op, count});
    }
  }
  cases.push_back({DType::f32, ReduceOp::sum, 1001, false});
  cases.push_back({DType::bf16, ReduceOp::avg, 1001, false});
  return cases;
}

// Buffers of 4 Mi + 3 elements: many shm chunks and tcp ring segments in flight.
std::vector<Case> large() {
  const size_t count = (size_t{4} << 20) + 3;
  return {{DType::f32, ReduceOp::sum, count},
          {DType::f32, ReduceOp::avg, count, false},
          {DType::f16, ReduceOp::sum, count},
          {DType::i64, ReduceOp::max, count}};
}

class HierAllReduce : public ::testing::TestWithParam<const char*> {};

TEST_P(HierAllReduce, MatchesClosedFormsForEveryDtypeAndOp) {
  auto outcomes = run_ranks(GetParam(), [](ProcessGroup& pg) {
    ASSERT_EQ(pg.backend_name(), "hier");
    for (const Case& c : matrix()) check_case(pg, c);
  });
  for (size_t r = 0; r < outcomes.size(); ++r)
    EXPECT_EQ(outcomes[r].type, "none") << "rank " << r << ": " << outcomes[r].what;
}

TEST_P(HierAllReduce, MatchesClosedFormsForLargeBuffers) {
  auto outcomes = run_ranks(GetParam(), [](ProcessGroup& pg) {
    for (const Case& c : large()) check_case(pg, c);
  });
  for (size_t r = 0; r < outcomes.size(); ++r)
    EXPECT_EQ(outcomes[r].type, "none") << "rank " << r << ": " << outcomes[r].what;
}

// Hosts per rank: 2 x 2; 3 + 1; interleaved (each host's ranks are not contiguous); 3 + 2.
INSTANTIATE_TEST_SUITE_P(Layouts, HierAllReduce,
                         ::testing::Values("a,a,b,b", "a,a,a,b", "a,b,b,a", "a,b,a,b,a"));

TEST(HierAllReduceAlgorithm, ForcedAlgorithmsRunBetweenLeadersAndBadOnesFail) {
  auto outcomes = run_ranks("a,a,b,b", [](ProcessGroup& pg) {
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling}) {
      std::vector<float> x(3000, static_cast<float>(pg.rank()));
      pg.all_reduce(view(x), {.algorithm = a})->wait();
      for (float v : x) ASSERT_EQ(v, 6.0f) << algorithm_name(a);
    }
    std::vector<float> x(10, 1.0f);
    pg.all_reduce(view(x), {.algorithm = Algorithm::tree})->wait();
  });
  // Every rank fails with the reason (ranks that ran ahead abort the ones still finishing the
  // previous op).
  for (size_t r = 0; r < outcomes.size(); ++r)
    EXPECT_TRUE(contains(outcomes[r].what,
                         "all_reduce #2: all_reduce runs ring, "
                         "recursive_doubling or automatic, not tree"))
        << "rank " << r << ": " << outcomes[r].what;
}

}  // namespace
}  // namespace lockstep::testing
