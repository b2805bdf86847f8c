#include "cli/bench_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lockstep::cli::bench {
namespace {

// No pattern value or result of the check reaches this, at any world size (data values stay
// below 101, reductions at or below 64: see reduce_value), and it fits every dtype, including i8.
constexpr double kSentinel = 121;

// Ranks below this fill the dense sum, avg and prod patterns of reduce_value. The ranks above
// contribute the op's identity except at one element each, so that a reduction over any number
// of ranks stays small (exact in bf16 and i8), while every rank still shows in the result.
constexpr size_t kDenseRanks = 25;

// Element i of rank r's input for ops that only move data: 0..100 (bool: 0 or 1).
double data_value(DType dtype, int r, size_t i) {
  const size_t rank = static_cast<size_t>(r);
  return dtype == DType::boolean ? static_cast<double>((rank + i) % 2)
                                 : static_cast<double>((rank * 7 + i) % 101);
}

// Element i of rank r's input for ops that reduce. Chosen per op so that the reduction over any
// number of ranks stays small: min and max of 0..6 and bitwise ops on 0..15 are bounded as they
// are. Sums and products are dense only on the first kDenseRanks ranks: sums of 0..2 (at most 26),
// products of 1s with a 2 on every fifth rank (at most 2^5). Every later rank r adds its marker
// (1 for sum and avg, a factor 2 for prod) to element r alone, and the identity elsewhere: at
// most 27 and 2^6 = 64 at any world size, where a product of a 2 on every fifth rank overflowed
// i8 from 31 ranks on (2^7 = 128).
double reduce_value(ReduceOp op, int r, size_t i) {
  const size_t rank = static_cast<size_t>(r);
  const bool dense = rank < kDenseRanks;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      if (!dense) return i == rank ? 1.0 : 0.0;
      return static_cast<double>((rank + i) % 3);
    case ReduceOp::prod:
      if (!dense) return i == rank ? 2.0 : 1.0;
      return (rank + i) % 5 == 0 ? 2.0 : 1.0;
    case ReduceOp::min:
    case ReduceOp::max:
      return static_cast<double>((rank * 3 + i) % 7);
    default:
      return static_cast<double>((rank * 5 + i * 3) % 16);
  }
}

double input_value(const OpParams& p, int r, size_t i) {
  return bench_op_reduces(p.op) ? reduce_value(p.reduce_op, r, i) : data_value(p.dtype, r, i);
}

double combine(ReduceOp op, double acc, double v) {
  const auto a = static_cast<int64_t>(acc), b = static_cast<int64_t>(v);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return acc + v;
    case ReduceOp::prod:
      return acc * v;
    case ReduceOp::min:
      return std::min(acc, v);
    case ReduceOp::max:
      return std::max(acc, v);
    case ReduceOp::band:
      return static_cast<double>(a & b);
    case ReduceOp::bor:
      return static_cast<double>(a | b);
    case ReduceOp::bxor:
      return static_cast<double>(a ^ b);
  }
  return acc;
}

// The reduction over every rank of element i, as the dtype holds it.
double reduced_value(const OpParams& p, int size, size_t i) {
  double acc = reduce_value(p.reduce_op, 0, i);
  for (int r = 1; r < size; ++r) acc = combine(p.reduce_op, acc, reduce_value(p.reduce_op, r, i));
  if (p.reduce_op != ReduceOp::avg) return acc;
  return is_integer(p.dtype) ? std::trunc(acc / size) : acc / size;
}

// Element k of rank `me`'s output once the op has run.
double expected_value(const OpParams& p, int me, int n, size_t k, size_t output_count) {
  const bool is_root = me == p.root;
  const size_t me_index = static_cast<size_t>(me);
  switch (p.op) {
    case BenchOp::all_reduce:
      return reduced_value(p, n, k);
    case BenchOp::reduce:
      return is_root ? reduced_value(p, n, k) : kSentinel;
    case BenchOp::reduce_scatter:
      return reduced_value(p, n, me_index * output_count + k);
    case BenchOp::broadcast:
      return data_value(p.dtype, p.root, k);
    case BenchOp::gather:
      if (!is_root) return kSentinel;
      [[fallthrough]];
    case BenchOp::all_gather: {
      const size_t slot = output_count / static_cast<size_t>(n);
      return data_value(p.dtype, static_cast<int>(k / slot), k % slot);
    }
    case BenchOp::all_to_all: {
      const size_t slot = output_count / static_cast<size_t>(n);
      return data_value(p.dtype, static_cast<int>(k / slot), me_index * slot + k % slot);
    }
    case BenchOp::scatter:
      return data_value(p.dtype, p.root, me_index * output_count + k);
    case BenchOp::sendrecv:
      return data_value(p.dtype, (me + n - 1) % n, k);
    case BenchOp::pingpong:
      return data_value(p.dtype, me % 2 == 0 ? me : me - 1, k);
  }
  return kSentinel;
}

// Calls fn(T{}) with T the C++ type that stores `dtype` (bool as uint8_t).
template <class Fn>
decltype(auto) with_element_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn(float{});
    case DType::f64:
      return fn(double{});
    case DType::f16:
      return fn(half{});
    case DType::bf16:
      return fn(bfloat16{});
    case DType::i8:
      return fn(int8_t{});
    case DType::i32:
      return fn(int32_t{});
    case DType::i64:
      return fn(int64_t{});
    case DType::u8:
    case DType::boolean:
      break;
  }
  return fn(uint8_t{});
}

template <class T>
T to_element(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return static_cast<double>(v);
}

// Allowed |got - expected| relative to max(1, |expected|). Every result is a small integer, exact
// in every dtype, except a float avg: a few units in the last place there.
double tolerance(const OpParams& p) {
  if (!bench_op_reduces(p.op) || p.reduce_op != ReduceOp::avg) return 0;
  switch (p.dtype) {
    case DType::f32:
      return 1e-6;
    case DType::f64:
      return 1e-12;
    case DType::f16:
      return 4e-3;
    case DType::bf16:
      return 2e-2;
    default:
      return 0;
  }
}

template <class F>
void fill(BufferView buffer, F&& value_at) {
  with_element_type(buffer.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(buffer.data);
    for (size_t i = 0; i < buffer.count; ++i) data[i] = to_element<T>(value_at(i));
  });
}

}  // namespace

void fill_for_check(const OpParams& p, int rank, BufferView input, BufferView output) {
  fill(input, [&](size_t i) { return input_value(p, rank, i); });
  if (p.op == BenchOp::broadcast && rank == p.root)
    fill(output, [&](size_t i) { return data_value(p.dtype, rank, i); });
  else
    fill(output, [](size_t) { return kSentinel; });
}

size_t count_wrong(const OpParams& p, int rank, int size, ConstBufferView output) {
  const double tol = tolerance(p);
  return with_element_type(output.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(output.data);
    size_t wrong = 0;
    for (size_t k = 0; k < output.count; ++k) {
      const double want = expected_value(p, rank, size, k, output.count);
      const double got = to_double(data[k]);
      // An output the op must leave alone holds the sentinel exactly, whatever the op's tolerance.
      const double allowed = want == kSentinel ? 0.0 : tol * std::max(1.0, std::fabs(want));
      if (!(std::fabs(got - want) <= allowed)) ++wrong;
    }
    return wrong;
  });
}

}  // namespace lockstep::cli::bench
