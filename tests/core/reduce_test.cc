// reduce_into, reduce_pair and finish_average for every supported (dtype, op), against the
// element-by-element reference of reduce_reference.h. Buffers start at element offsets from an
// aligned allocation (different for each operand) and carry guard elements on both sides.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/reduce.h"
#include "core/reduce16.h"
#include "core/reduce_kernels.h"
#include "core/reduce_reference.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

using testing::matches;
using testing::random_value;
using testing::reference_divide;
using testing::reference_op;
using testing::StorageT;
using testing::with_dtype;

constexpr size_t kSizes[] = {0, 1, 7, 1000, 1000003};

// count elements starting `offset` elements into the allocation, with guard elements before
// (offset of them) and after (kGuard), all holding a pattern that must survive the operation.
template <class T>
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 3;
  GuardedBuffer(const std::vector<T>& init, size_t offset)
      : offset_(offset), storage_(offset + init.size() + kGuard) {
    std::memset(static_cast<void*>(storage_.data()), 0x5a, storage_.size() * sizeof(T));
    std::copy(init.begin(), init.end(), storage_.begin() + static_cast<ptrdiff_t>(offset));
  }
  T* data() { return storage_.data() + offset_; }
  bool guards_intact() const {
    T guard;
    std::memset(static_cast<void*>(&guard), 0x5a, sizeof(T));
    for (size_t i = 0; i < storage_.size(); ++i) {
      const bool is_guard = i < offset_ || i >= storage_.size() - kGuard;
      if (is_guard && std::memcmp(&storage_[i], &guard, sizeof(T)) != 0) return false;
    }
    return true;
  }

 private:
  size_t offset_;
  std::vector<T> storage_;
};

template <class T>
std::string bits_of(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(v));
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

// Passes when every element of actual matches expected; otherwise names the first bad one.
template <DType D>
::testing::AssertionResult all_match(ReduceOp op, const std::vector<StorageT<D>>& a,
                                     const std::vector<StorageT<D>>& b,
                                     const std::vector<StorageT<D>>& expected,
                                     const StorageT<D>* actual) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (matches<D>(op, expected[i], actual[i])) continue;
    if (bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << expected.size() << " elements wrong; first at " << first << ": "
         << bits_of(a[first]) << " op " << bits_of(b[first]) << " expected "
         << bits_of(expected[first]) << ", got " << bits_of(actual[first]);
}

template <DType D>
std::vector<StorageT<D>> random_vector(size_t count, std::mt19937_64& rng) {
  std::vector<StorageT<D>> out(count);
  for (auto& v : out) v = random_value<D>(rng);
  return out;
}

// Calls fn.template operator()<Op>() with the kernel operator for op.
template <class T, class Fn>
void with_kernel_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return fn.template operator()<detail::SumOp>();
    case ReduceOp::prod:
      return fn.template operator()<detail::ProdOp>();
    case ReduceOp::min:
      return fn.template operator()<detail::MinOp>();
    case ReduceOp::max:
      return fn.template operator()<detail::MaxOp>();
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    if (op == ReduceOp::band) return fn.template operator()<detail::AndOp>();
    if (op == ReduceOp::bor) return fn.template operator()<detail::OrOp>();
    if (op == ReduceOp::bxor) return fn.template operator()<detail::XorOp>();
  }
  FAIL() << "no kernel operator for " << reduce_op_name(op);
}

// Runs every entry point that computes a op b element-wise and checks each against one
// reference vector.
template <DType D>
void check_reduce(ReduceOp op, size_t count) {
  using T = StorageT<D>;
  std::mt19937_64 rng(count * 131 + static_cast<size_t>(D) * 17 + static_cast<size_t>(op));
  const std::vector<T> a = random_vector<D>(count, rng);
  const std::vector<T> b = random_vector<D>(count, rng);
  std::vector<T> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = reference_op<D>(op, a[i], b[i]);

  {  // reduce_into, dst and src misaligned differently
    GuardedBuffer<T> dst(a, 1), src(b, 2);
    reduce_into(dst.data(), src.data(), count, D, op);
    EXPECT_TRUE(all_match<D>(op, a, b, expected, dst.data())) << "reduce_into";
    EXPECT_TRUE(dst.guards_intact()) << "reduce_into wrote outside dst";
  }
  {  // reduce_pair into a third buffer
    GuardedBuffer<T> dst(std::vector<T>(count), 1), in_a(a, 0), in_b(b, 3);
    reduce_pair(dst.data(), in_a.data(), in_b.data(), count, D, op);
    EXPECT_TRUE(all_match<D>(op, a, b, expected, dst.data())) << "reduce_pair";
    EXPECT_TRUE(dst.guards_intact()) << "reduce_pair wrote outside dst";
  }
  if (count > 1000) return;  // the aliasing variants take the same code paths at any size
  {                          // reduce_pair with dst == a
    GuardedBuffer<T> in_a(a, 1), in_b(b, 0);
    reduce_pair(in_a.data(), in_a.data(), in_b.data(), count, D, op);
    EXPECT_TRUE(all_match<D>(op, a, b, expected, in_a.data())) << "reduce_pair dst == a";
    EXPECT_TRUE(in_a.guards_intact());
  }
  {  // reduce_pair with dst == b
    GuardedBuffer<T> in_a(a, 2), in_b(b, 1);
    reduce_pair(in_b.data(), in_a.data(), in_b.data(), count, D, op);
    EXPECT_TRUE(all_match<D>(op, a, b, expected, in_b.data())) << "reduce_pair dst == b";
    EXPECT_TRUE(in_b.guards_intact());
  }
  // The baseline (non-AVX2) flavours, whatever this CPU would pick.
  if constexpr (testing::is_16bit(D)) {
    std::vector<uint16_t> dst(count);
    detail::reduce_16bit_baseline(dst.data(), a.data(), b.data(), count, D, op);
    EXPECT_TRUE(all_match<D>(op, a, b, expected, dst.data())) << "baseline 16-bit flavour";
  } else {
    std::vector<T> into = a, pair(count);
    with_kernel_op<T>(op, [&]<class Op>() {
      detail::into_loop<T, Op>(into.data(), b.data(), count);
      detail::pair_loop<T, Op>(pair.data(), a.data(), b.data(), count);
    });
    EXPECT_TRUE(all_match<D>(op, a, b, expected, into.data())) << "baseline into_loop";
    EXPECT_TRUE(all_match<D>(op, a, b, expected, pair.data())) << "baseline pair_loop";
  }
}

// x op x, through reduce_pair(x, x, x) and reduce_into(x, x).
template <DType D>
void check_self_reduce(ReduceOp op) {
  using T = StorageT<D>;
  std::mt19937_64 rng(99);
  const std::vector<T> a = random_vector<D>(1000, rng);
  std::vector<T> expected(a.size());
  for (size_t i = 0; i < a.size(); ++i) expected[i] = reference_op<D>(op, a[i], a[i]);
  std::vector<T> x = a;
  reduce_pair(x.data(), x.data(), x.data(), x.size(), D, op);
  EXPECT_TRUE(all_match<D>(op, a, a, expected, x.data())) << "reduce_pair(x, x, x)";
  x = a;
  reduce_into(x.data(), x.data(), x.size(), D, op);
  EXPECT_TRUE(all_match<D>(op, a, a, expected, x.data())) << "reduce_into(x, x)";
}

struct Case {
  DType dtype;
  ReduceOp op;
};

std::vector<Case> supported_cases() {
  std::vector<Case> out;
  for (DType d : kAllDTypes)
    for (ReduceOp op : kAllReduceOps)
      if (reduce_op_supports(op, d)) out.push_back({d, op});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.dtype)) + "_" +
         std::string(reduce_op_name(info.param.op));
}

class ReduceKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReduceKernelTest, MatchesReferenceAtEverySize) {
  const Case c = GetParam();
  for (size_t count : kSizes) {
    SCOPED_TRACE("count " + std::to_string(count));
    with_dtype(c.dtype, [&]<DType D>() { check_reduce<D>(c.op, count); });
  }
}

TEST_P(ReduceKernelTest, ReducesABufferWithItself) {
  const Case c = GetParam();
  with_dtype(c.dtype, [&]<DType D>() { check_self_reduce<D>(c.op); });
}

INSTANTIATE_TEST_SUITE_P(AllSupported, ReduceKernelTest, ::testing::ValuesIn(supported_cases()),
                         case_name);

TEST(ReduceKernelTest, CoversEveryDtypeAndOpThatSupportsAllows) {
  // 4 float dtypes x 5 ops + 4 integer dtypes x 8 ops; bool has none.
  EXPECT_EQ(supported_cases().size(), 4u * 5 + 4u * 8);
}

template <DType D>
void check_finish_average(size_t count, int divisor) {
  using T = StorageT<D>;
  std::mt19937_64 rng(count + static_cast<size_t>(divisor) * 1000);
  const std::vector<T> x = random_vector<D>(count, rng);
  std::vector<T> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = reference_divide<D>(x[i], divisor);
  GuardedBuffer<T> data(x, 1);
  finish_average(data.data(), count, D, divisor);
  EXPECT_TRUE(all_match<D>(ReduceOp::avg, x, x, expected, data.data())) << "divisor " << divisor;
  EXPECT_TRUE(data.guards_intact());
}

class FinishAverageTest : public ::testing::TestWithParam<DType> {};

TEST_P(FinishAverageTest, DividesLikeTheReference) {
  for (size_t count : kSizes) {
    SCOPED_TRACE("count " + std::to_string(count));
    for (int divisor : {1, 3, 7, 8, 200}) {
      if (count > 1000 && divisor != 3) continue;
      with_dtype(GetParam(), [&]<DType D>() { check_finish_average<D>(count, divisor); });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllNumeric, FinishAverageTest,
                         ::testing::Values(DType::f32, DType::f64, DType::f16, DType::bf16,
                                           DType::i8, DType::u8, DType::i32, DType::i64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(FinishAverageTest, IntegersTruncateTowardZero) {
  int32_t v[] = {7, -7, 5, -5, -1, INT32_MIN};
  finish_average(v, 6, DType::i32, 2);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -3);
  EXPECT_EQ(v[2], 2);
  EXPECT_EQ(v[3], -2);
  EXPECT_EQ(v[4], 0);
  EXPECT_EQ(v[5], INT32_MIN / 2);
  int8_t small[] = {-128, 127};
  finish_average(small, 2, DType::i8, 200);  // divisor beyond int8's range
  EXPECT_EQ(small[0], 0);
  EXPECT_EQ(small[1], 0);
  finish_average(small, 2, DType::i8, 1);
  uint8_t u[] = {255};
  finish_average(u, 1, DType::u8, 2);
  EXPECT_EQ(u[0], 127);
}

TEST(FinishAverageTest, FloatsDivideExactly) {
  double d[] = {1.0, -6.0};
  finish_average(d, 2, DType::f64, 3);
  EXPECT_EQ(d[0], 0x1.5555555555555p-2);  // 1/3 rounded to nearest
  EXPECT_EQ(d[1], -2.0);
  float f[] = {1.0f};
  finish_average(f, 1, DType::f32, 3);
  EXPECT_EQ(f[0], 0x1.555556p-2f);
}

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument thrown)";
}

TEST(ReduceErrorsTest, UnsupportedCombinationsNameOpAndDtype) {
  float f[4] = {};
  const std::string band = error_of([&] { reduce_into(f, f, 4, DType::f32, ReduceOp::band); });
  EXPECT_NE(band.find("reduce_into"), std::string::npos) << band;
  EXPECT_NE(band.find("band"), std::string::npos) << band;
  EXPECT_NE(band.find("f32"), std::string::npos) << band;
  bool flags[4] = {};
  const std::string boolean =
      error_of([&] { reduce_pair(flags, flags + 1, flags + 2, 1, DType::boolean, ReduceOp::max); });
  EXPECT_NE(boolean.find("bool"), std::string::npos) << boolean;
  EXPECT_NE(boolean.find("max"), std::string::npos) << boolean;
}

TEST(ReduceErrorsTest, FinishAverageRejectsNonPositiveDivisorAndBool) {
  int32_t v[1] = {4};
  const std::string zero = error_of([&] { finish_average(v, 1, DType::i32, 0); });
  EXPECT_NE(zero.find("divisor 0"), std::string::npos) << zero;
  EXPECT_NE(error_of([&] { finish_average(v, 1, DType::i32, -2); }).find("divisor -2"),
            std::string::npos);
  EXPECT_EQ(v[0], 4);
  bool b[1] = {true};
  EXPECT_NE(error_of([&] { finish_average(b, 1, DType::boolean, 2); }).find("bool"),
            std::string::npos);
}

TEST(ReduceErrorsTest, EmptyCallsTouchNothing) {
  for (const auto& [dtype, op] : supported_cases()) {
    reduce_into(nullptr, nullptr, 0, dtype, op);
    reduce_pair(nullptr, nullptr, nullptr, 0, dtype, op);
  }
  finish_average(nullptr, 0, DType::f16, 3);
}

TEST(ReduceKernelTest, IntegerSumsWrapLikeUnsigned) {
  int8_t a[] = {127, -128, 100};
  const int8_t b[] = {1, -1, 100};
  reduce_into(a, b, 3, DType::i8, ReduceOp::sum);
  EXPECT_EQ(a[0], -128);
  EXPECT_EQ(a[1], 127);
  EXPECT_EQ(a[2], -56);
  int64_t big[] = {INT64_MAX, INT64_MIN};
  const int64_t two[] = {2, -1};
  reduce_into(big, two, 2, DType::i64, ReduceOp::prod);
  EXPECT_EQ(big[0], -2);         // (2^63 - 1) * 2 mod 2^64
  EXPECT_EQ(big[1], INT64_MIN);  // -2^63 * -1 wraps to itself
}

TEST(ReduceKernelTest, FloatMinMaxPropagateNanFromEitherSide) {
  float d[] = {NAN, 1.0f, -0.0f};
  const float s[] = {1.0f, NAN, 0.0f};
  float mn[3], mx[3];
  reduce_pair(mn, d, s, 3, DType::f32, ReduceOp::min);
  reduce_pair(mx, d, s, 3, DType::f32, ReduceOp::max);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_EQ(mn[2], 0.0f);
  EXPECT_EQ(mx[2], 0.0f);
}

}  // namespace
}  // namespace lockstep
