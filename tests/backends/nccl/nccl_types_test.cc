// The dtype and reduce-op tables of the nccl backend, checked against NCCL's own enum values and
// element sizes. No GPU needed.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backends/nccl/nccl_types.h"

namespace lockstep::nccl {
namespace {

// NCCL's element sizes, from its documentation of ncclDataType_t.
size_t nccl_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

TEST(NcclTypes, EveryDTypeMapsToAnNcclTypeOfTheSameSize) {
  for (DType t : kAllDTypes) EXPECT_EQ(nccl_size(nccl_dtype(t)), element_size(t)) << dtype_name(t);
}

TEST(NcclTypes, DTypesKeepTheirMeaning) {
  const std::map<DType, ncclDataType_t> expected = {
      {DType::f32, ncclFloat32},   {DType::f64, ncclFloat64}, {DType::f16, ncclFloat16},
      {DType::bf16, ncclBfloat16}, {DType::i8, ncclInt8},     {DType::u8, ncclUint8},
      {DType::i32, ncclInt32},     {DType::i64, ncclInt64},   {DType::boolean, ncclUint8}};
  for (auto [dtype, nccl] : expected) EXPECT_EQ(nccl_dtype(dtype), nccl) << dtype_name(dtype);
  // Signedness matters for min, max and avg: no signed type may become an unsigned one.
  EXPECT_NE(nccl_dtype(DType::i8), ncclUint8);
  EXPECT_NE(nccl_dtype(DType::i32), ncclUint32);
  EXPECT_NE(nccl_dtype(DType::i64), ncclUint64);
}

TEST(NcclTypes, ArithmeticReduceOpsMapOneToOne) {
  EXPECT_EQ(nccl_reduce_op(ReduceOp::sum), ncclSum);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::avg), ncclAvg);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::prod), ncclProd);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::min), ncclMin);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::max), ncclMax);
  std::set<int> distinct;
  for (ReduceOp op : kAllReduceOps)
    if (auto r = nccl_reduce_op(op)) distinct.insert(static_cast<int>(*r));
  EXPECT_EQ(distinct.size(), 5u);
}

TEST(NcclTypes, BitwiseReduceOpsHaveNoNcclEquivalent) {
  EXPECT_EQ(nccl_reduce_op(ReduceOp::band), std::nullopt);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::bor), std::nullopt);
  EXPECT_EQ(nccl_reduce_op(ReduceOp::bxor), std::nullopt);
}

TEST(NcclTypes, ErrorTextNamesTheResultAndNcclsDescription) {
  std::string remote = nccl_error_text(ncclRemoteError, nullptr);
  EXPECT_EQ(remote.rfind("ncclRemoteError (", 0), 0u) << remote;
  EXPECT_GT(remote.size(), std::string("ncclRemoteError ()").size()) << remote;
  EXPECT_EQ(nccl_error_text(ncclInvalidUsage, nullptr).rfind("ncclInvalidUsage (", 0), 0u);
  EXPECT_EQ(nccl_error_text(static_cast<ncclResult_t>(99), nullptr).rfind("ncclResult 99", 0), 0u);
}

}  // namespace
}  // namespace lockstep::nccl
