// How lockstep's element types and reduce ops map onto NCCL's. Tables only: tested without a GPU.
#pragma once

#include <nccl.h>

#include <optional>
#include <string>

#include "comm/failure.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::nccl {

// The NCCL type with the same size and meaning. bool moves as ncclUint8 (it is never reduced).
ncclDataType_t nccl_dtype(DType dtype);

// The NCCL reduction for op, or nothing for the bitwise ops (band, bor, bxor), which NCCL lacks.
// avg is ncclAvg: the sum divided by the group size.
std::optional<ncclRedOp_t> nccl_reduce_op(ReduceOp op);

// NCCL releases after 2.28 add ncclTimeout (8): a library newer than these headers may return it.
inline constexpr int kNcclTimeout = 8;

// "ncclRemoteError (remote process exited or there was a network error): <NCCL's last error>".
// comm may be null.
std::string nccl_error_text(ncclResult_t result, ncclComm_t comm);

// The lockstep error class an NCCL failure raises:
//   ncclRemoteError, ncclSystemError          network (a peer died or a connection broke)
//   ncclTimeout                               timeout
//   ncclInvalidArgument, ncclInvalidUsage     invalid_argument (the call was wrong)
//   the rest (CUDA, internal, unknown)        other (Error)
ErrorClass nccl_error_class(ncclResult_t result);

}  // namespace lockstep::nccl
