#include "backends/nccl/nccl_types.h"

namespace lockstep::nccl {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i8:
      return ncclInt8;
    case DType::u8:
      return ncclUint8;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::boolean:
      return ncclUint8;
  }
  return ncclUint8;
}

std::optional<ncclRedOp_t> nccl_reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  // Indexed by value, ncclTimeout included: a newer libnccl than nccl.h may return it.
  static constexpr const char* kNames[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};
  static_assert(ncclInProgress == 7 && std::size(kNames) == kNcclTimeout + 1);
  const auto value = static_cast<unsigned>(result);
  std::string text =
      value < std::size(kNames) ? kNames[value] : "ncclResult " + std::to_string(value);
  const char* reason = static_cast<int>(result) == kNcclTimeout ? "an NCCL operation timed out"
                                                                : ncclGetErrorString(result);
  text += std::string(" (") + (reason != nullptr ? reason : "unknown") + ")";
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  return text;
}

ErrorClass nccl_error_class(ncclResult_t result) {
  if (static_cast<int>(result) == kNcclTimeout) return ErrorClass::timeout;
  switch (result) {
    case ncclRemoteError:
    case ncclSystemError:
      return ErrorClass::network;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return ErrorClass::invalid_argument;
    default:
      return ErrorClass::other;
  }
}

}  // namespace lockstep::nccl
