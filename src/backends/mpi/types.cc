#include "backends/mpi/types.h"

#include "core/reduce.h"

namespace lockstep::mpi {

namespace {

constexpr ReduceOp k16BitOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};

// MPI_User_function for dtype T and op O: inout[i] = in[i] O inout[i]. Every lockstep op is
// commutative, so the order of the operands does not matter.
template <DType T, ReduceOp O>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  reduce_into(inout, in, static_cast<size_t>(*len), T, O);
}

template <DType T>
MPI_User_function* user_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::prod:
      return &reduce_16bit<T, ReduceOp::prod>;
    case ReduceOp::min:
      return &reduce_16bit<T, ReduceOp::min>;
    case ReduceOp::max:
      return &reduce_16bit<T, ReduceOp::max>;
    default:
      return &reduce_16bit<T, ReduceOp::sum>;
  }
}

// [16-bit floats] One MPI_Op per 16-bit dtype and op, created on first use.
struct UserOps {
  MPI_Op f16[4];
  MPI_Op bf16[4];
};

const UserOps& user_ops() {
  static const UserOps ops = [] {
    UserOps o{};
    for (size_t i = 0; i < 4; ++i) {
      MPI_Op_create(user_function<DType::f16>(k16BitOps[i]), 1, &o.f16[i]);
      MPI_Op_create(user_function<DType::bf16>(k16BitOps[i]), 1, &o.bf16[i]);
    }
    return o;
  }();
  return ops;
}

size_t index_16bit(ReduceOp op) {
  switch (op) {
    case ReduceOp::prod:
      return 1;
    case ReduceOp::min:
      return 2;
    case ReduceOp::max:
      return 3;
    default:
      return 0;  // sum, avg
  }
}

}  // namespace

MPI_Datatype datatype_of(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i8:
      return MPI_INT8_T;
    case DType::u8:
    case DType::boolean:
      return MPI_UINT8_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
  }
  return MPI_BYTE;
}

MPI_Op op_of(ReduceOp op, DType t) {
  if (t == DType::f16) return user_ops().f16[index_16bit(op)];
  if (t == DType::bf16) return user_ops().bf16[index_16bit(op)];
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::band:
      return MPI_BAND;
    case ReduceOp::bor:
      return MPI_BOR;
    case ReduceOp::bxor:
      return MPI_BXOR;
  }
  return MPI_SUM;
}

}  // namespace lockstep::mpi
