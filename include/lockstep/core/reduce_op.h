// Reduction operators for all_reduce, reduce and reduce_scatter.
#pragma once

#include <cstdint>
#include <string_view>

#include "lockstep/core/dtype.h"

namespace lockstep {

// avg divides the sum by the group size (integers: truncating division).
// band, bor and bxor are for integer dtypes only.
enum class ReduceOp : uint8_t { sum, avg, prod, min, max, band, bor, bxor };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod,
                                             ReduceOp::min, ReduceOp::max, ReduceOp::band,
                                             ReduceOp::bor, ReduceOp::bxor};

std::string_view reduce_op_name(ReduceOp op);
// Parses "sum", "avg", ...; throws InvalidArgument listing the accepted names.
ReduceOp parse_reduce_op(std::string_view name);

// Whether op may reduce elements of type t. Bitwise ops need an integer dtype; no op reduces bool.
constexpr bool reduce_op_supports(ReduceOp op, DType t) {
  if (t == DType::boolean) return false;
  if (op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor) return is_integer(t);
  return true;
}

}  // namespace lockstep
