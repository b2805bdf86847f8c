// lockstep's element types and reduce ops as MPI sees them.
//
// [16-bit floats] MPI has no f16 or bf16. They travel as MPI_UINT16_T, and reduce through
// user-defined MPI_Ops that call lockstep's own kernels (each element computed in f32 and rounded
// once), so results match the other backends. avg reduces as sum; the backend divides afterwards.
#pragma once

#include "backends/mpi/mpi.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::mpi {

// The MPI type of one element of t (bool: MPI_UINT8_T; f16/bf16: MPI_UINT16_T).
MPI_Datatype datatype_of(DType t);

// The MPI_Op that reduces elements of t with op (avg: the sum). REQUIRES reduce_op_supports(op, t)
// and ensure_initialized(). The user-defined ops are created once per process.
MPI_Op op_of(ReduceOp op, DType t);

}  // namespace lockstep::mpi
