#include "c10d/tensors.h"

#include "lockstep/comm/options.h"

#include "lockstep/core/error.h"
#include "torch/tensor_views.h"

namespace lockstep::c10d_backend {

BufferView view_of(const at::Tensor& contiguous, const char* op) {
  auto dtype = lockstep::torch::detail::to_dtype(contiguous.scalar_type());
  if (!dtype)
    throw InvalidArgument(detail::concat("lockstep ", op, ": dtype ", contiguous.scalar_type(),
                                         " is not supported (float32, float64, float16, "
                                         "bfloat16, int8, uint8, int32, int64, bool)"));
  // The message only off the CPU path: this runs for every op.
  Device device = contiguous.device().is_cpu() ? Device{}
                                               : lockstep::torch::detail::device_tag(
                                                     contiguous, detail::concat("lockstep ", op));
  return BufferView{contiguous.data_ptr(), static_cast<size_t>(contiguous.numel()), *dtype, device};
}

Staged stage(const at::Tensor& t) {
  return Staged{t, t.is_contiguous() ? t : t.contiguous()};
}

const at::Tensor& single(const Tensors& tensors, const char* op) {
  if (tensors.size() != 1)
    throw InvalidArgument(detail::concat(
        "lockstep ", op, ": takes exactly one tensor, got ", tensors.size(),
        " (lists of one tensor per device are not supported: use one process per device)"));
  return tensors.front();
}

at::Tensor flat_copy(const Tensors& tensors) {
  Tensors flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten_into(const at::Tensor& flat, const Tensors& tensors) {
  int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, at, t.numel()).view_as(t));
    at += t.numel();
  }
}

void require_same(const Tensors& tensors, const at::Tensor& like, const char* op,
                  const char* what) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].numel() != like.numel() || tensors[i].scalar_type() != like.scalar_type())
      throw InvalidArgument(
          detail::concat("lockstep ", op, ": ", what, "[", i, "] has ", tensors[i].numel(),
                         " elements of ", tensors[i].scalar_type(), ", but the input has ",
                         like.numel(), " of ", like.scalar_type(), "; each must match the input"));
}

void require_count(const Tensors& tensors, size_t count, const char* op, const char* what) {
  if (tensors.size() != count)
    throw InvalidArgument(detail::concat("lockstep ", op, ": ", what, " has ", tensors.size(),
                                         " tensors; it needs one per rank (", count, ")"));
}

void require_scaled(const Tensors& large, const Tensors& small, int64_t factor, const char* op,
                    const char* what) {
  for (size_t i = 0; i < small.size(); ++i)
    if (large[i].numel() != factor * small[i].numel() ||
        large[i].scalar_type() != small[i].scalar_type())
      throw InvalidArgument(detail::concat("lockstep ", op, ": ", what, "[", i, "] has ",
                                           large[i].numel(), " elements of ",
                                           large[i].scalar_type(), "; it needs ", factor, " x ",
                                           small[i].numel(), " of ", small[i].scalar_type()));
}

void require_one_kind(const Tensors& tensors, const char* op) {
  if (tensors.empty()) throw InvalidArgument(detail::concat("lockstep ", op, ": no tensors"));
  for (const auto& t : tensors)
    if (t.scalar_type() != tensors[0].scalar_type() || t.device() != tensors[0].device())
      throw InvalidArgument(
          detail::concat("lockstep ", op, ": every tensor must have one dtype and device (got ",
                         tensors[0].scalar_type(), " on ", tensors[0].device().str(), " and ",
                         t.scalar_type(), " on ", t.device().str(), ")"));
}

ReduceOp reduce_op(const ::c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      return ReduceOp::sum;
    case ::c10d::ReduceOp::AVG:
      return ReduceOp::avg;
    case ::c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case ::c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case ::c10d::ReduceOp::MAX:
      return ReduceOp::max;
    case ::c10d::ReduceOp::BAND:
      return ReduceOp::band;
    case ::c10d::ReduceOp::BOR:
      return ReduceOp::bor;
    case ::c10d::ReduceOp::BXOR:
      return ReduceOp::bxor;
    default:
      throw InvalidArgument(detail::concat(
          "lockstep ", name, ": reduce op ", static_cast<int>(op.op_),
          " (PREMUL_SUM) is not supported yet; multiply the tensor first, then use SUM"));
  }
}

std::chrono::milliseconds timeout_of(std::chrono::milliseconds t) {
  return t == ::c10d::kUnsetTimeout ? kGroupTimeout : t;
}

}  // namespace lockstep::c10d_backend
