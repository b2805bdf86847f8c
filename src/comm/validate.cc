#include "comm/validate.h"

#include <limits>

#include "lockstep/core/error.h"

namespace lockstep::validate {

void rank_in_group(std::string_view op, std::string_view what, int rank, int size) {
  LOCKSTEP_ENFORCE(rank >= 0 && rank < size, InvalidArgument, op, ": ", what, " ", rank,
                   " is outside the group (valid ranks: 0..", size - 1, ")");
}

void reducible(std::string_view op, DType dtype, ReduceOp reduce_op) {
  if (reduce_op_supports(reduce_op, dtype)) return;
  if (dtype == DType::boolean)
    throw InvalidArgument(detail::concat(op, ": cannot reduce bool elements (",
                                         reduce_op_name(reduce_op),
                                         "); use u8 with max (or) / min (and)"));
  throw InvalidArgument(detail::concat(op, ": reduce op ", reduce_op_name(reduce_op),
                                       " needs an integer dtype, got ", dtype_name(dtype)));
}

void has_data(std::string_view op, std::string_view what, ConstBufferView v) {
  LOCKSTEP_ENFORCE(v.count == 0 || v.data != nullptr, InvalidArgument, op, ": ", what, " has ",
                   v.count, " elements but a null data pointer");
}

void same_dtype(std::string_view op, ConstBufferView input, ConstBufferView output) {
  LOCKSTEP_ENFORCE(input.dtype == output.dtype, InvalidArgument, op, ": input is ",
                   dtype_name(input.dtype), " but output is ", dtype_name(output.dtype),
                   "; both must have the same dtype");
}

void same_device(std::string_view op, ConstBufferView input, ConstBufferView output) {
  LOCKSTEP_ENFORCE(input.device == output.device, InvalidArgument, op, ": input is on ",
                   device_name(input.device), " but output is on ", device_name(output.device),
                   "; both must be on the same device");
}

void count_is(std::string_view op, std::string_view what, ConstBufferView v, size_t expected,
              std::string_view why) {
  LOCKSTEP_ENFORCE(v.count == expected, InvalidArgument, op, ": ", what, " holds ", v.count,
                   " elements but must hold ", expected, " (", why, ")");
}

size_t counts_sum(std::string_view op, std::string_view what, std::span<const size_t> counts,
                  int size) {
  LOCKSTEP_ENFORCE(counts.size() == static_cast<size_t>(size), InvalidArgument, op, ": ", what,
                   " has ", counts.size(), " entries but the group has ", size,
                   " ranks (one count per rank)");
  size_t sum = 0;
  for (size_t c : counts) {
    LOCKSTEP_ENFORCE(c <= std::numeric_limits<size_t>::max() / 16 - sum, InvalidArgument, op, ": ",
                     what, " add up to more elements than memory can hold");
    sum += c;
  }
  return sum;
}

void divisible(std::string_view op, std::string_view what, ConstBufferView v, int parts) {
  LOCKSTEP_ENFORCE(v.count % static_cast<size_t>(parts) == 0, InvalidArgument, op, ": ", what,
                   " holds ", v.count, " elements, which do not split evenly into ", parts,
                   " per-rank slots");
}

void algorithm(const Op& op) {
  const Algorithm a = op.algorithm;
  if (a == Algorithm::automatic) return;
  if (op.kind == OpKind::all_reduce)
    LOCKSTEP_ENFORCE(a == Algorithm::ring || a == Algorithm::recursive_doubling, InvalidArgument,
                     op.name(), ": all_reduce runs ring, recursive_doubling or automatic, not ",
                     algorithm_name(a));
  if (op.kind == OpKind::broadcast)
    LOCKSTEP_ENFORCE(a == Algorithm::tree || a == Algorithm::chain, InvalidArgument, op.name(),
                     ": broadcast runs tree, chain or automatic, not ", algorithm_name(a));
}

}  // namespace lockstep::validate
