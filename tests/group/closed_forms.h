// Inputs and closed-form results for the collective tests: rank r's element i is a small
// integer, so every dtype represents every input and every result exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "lockstep/core/reduce_op.h"
#include "support/typed_buffer.h"

namespace lockstep::testing {

inline bool bitwise(ReduceOp op) {
  return op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
}

// Rank r's input element i for reduce op `op`.
inline double reduce_input(ReduceOp op, int r, size_t i) {
  if (op == ReduceOp::prod) return 1 + (static_cast<size_t>(r) + i) % 2;
  if (bitwise(op)) return static_cast<double>((1 << (r % 6)) ^ static_cast<int>(i % 3));
  return r + 1 + static_cast<double>(i % 5);
}

// The reduction over ranks 0..n-1 of reduce_input, in closed form.
inline double reduce_expected(ReduceOp op, DType t, int n, size_t i) {
  const double k = static_cast<double>(i % 5);
  switch (op) {
    case ReduceOp::sum:
      return n * (n + 1) / 2.0 + n * k;
    case ReduceOp::avg: {
      double sum = n * (n + 1) / 2.0 + n * k;
      return is_integer(t) ? std::trunc(sum / n) : sum / n;
    }
    case ReduceOp::prod: {
      int odd = 0;  // ranks whose input is 2
      for (int r = 0; r < n; ++r) odd += (static_cast<size_t>(r) + i) % 2 == 1;
      return std::ldexp(1.0, odd);
    }
    case ReduceOp::min:
      return 1 + k;
    case ReduceOp::max:
      return n + k;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor: {
      int64_t acc = static_cast<int64_t>(reduce_input(op, 0, i));
      for (int r = 1; r < n; ++r) {
        auto v = static_cast<int64_t>(reduce_input(op, r, i));
        acc = op == ReduceOp::band ? (acc & v) : op == ReduceOp::bor ? (acc | v) : (acc ^ v);
      }
      return static_cast<double>(acc);
    }
  }
  return 0;
}

// A value that identifies (rank, element) for data-movement ops, exact in every dtype (bool: 0/1).
inline double tagged(DType t, int r, size_t i) {
  if (t == DType::boolean) return static_cast<double>((static_cast<size_t>(r) + i) % 2);
  if (t == DType::i8) return static_cast<double>((r * 13 + static_cast<int>(i % 97)) % 120);
  if (t == DType::u8) return static_cast<double>((r * 29 + static_cast<int>(i % 211)) % 250);
  if (t == DType::f16 || t == DType::bf16)  // exact: integers up to 256
    return static_cast<double>((r * 31 + static_cast<int>(i % 199)) % 256);
  if (t == DType::f32)  // exact: integers below 2^24
    return r * 100003.0 + static_cast<double>(i % 100003);
  return r * 1000003.0 + static_cast<double>(i % 1000003);
}

// Throws a description of the first element where buf differs from expect(i).
template <class F>
void check_elements(const TypedBuffer& buf, F expect, const std::string& context, size_t offset = 0,
                    size_t n = SIZE_MAX) {
  size_t end = n == SIZE_MAX ? buf.count() : offset + n;
  for (size_t i = offset; i < end; ++i) {
    double want = expect(i);
    double got = buf.get(i);
    if (got != want) {
      std::ostringstream msg;
      msg << context << ": element " << i << " is " << got << ", expected " << want;
      throw std::runtime_error(msg.str());
    }
  }
}

}  // namespace lockstep::testing
