// at::Tensor <-> rpc::Tensor without copies (lockstep/torch/rpc_tensor.h).
#include "lockstep/torch/rpc_tensor.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <memory>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::torch {

using detail::concat;

namespace {

// Indexed by rpc::ElementType (value.h's order).
constexpr c10::ScalarType kScalarTypes[rpc::kElementTypes] = {
    c10::kFloat, c10::kDouble, c10::kHalf, c10::kBFloat16, c10::kChar,         c10::kByte,
    c10::kShort, c10::kInt,    c10::kLong, c10::kBool,     c10::kComplexFloat, c10::kComplexDouble};

}  // namespace

c10::ScalarType scalar_type_of(rpc::ElementType type) {
  const auto i = static_cast<size_t>(type);
  if (i >= rpc::kElementTypes)
    throw InvalidArgument(concat("from_rpc: element type ", i, " is none of lockstep rpc's ",
                                 rpc::kElementTypes, " (a corrupt rpc::Tensor?)"));
  return kScalarTypes[i];
}

rpc::ElementType element_type_of(c10::ScalarType type) {
  for (size_t i = 0; i < rpc::kElementTypes; ++i)
    if (kScalarTypes[i] == type) return static_cast<rpc::ElementType>(i);
  throw InvalidArgument(concat("to_rpc: a tensor of dtype ", c10::toString(type),
                               ", which lockstep rpc does not carry (it carries Float, Double, "
                               "Half, BFloat16, Char, Byte, Short, Int, Long, Bool, ComplexFloat "
                               "and ComplexDouble)"));
}

rpc::Tensor to_rpc(const at::Tensor& tensor) {
  if (!tensor.defined()) throw InvalidArgument("to_rpc: an undefined tensor");
  if (!tensor.device().is_cpu())
    throw InvalidArgument(concat("to_rpc: a tensor on ", tensor.device().str(),
                                 ", and lockstep rpc carries CPU tensors: move it with .cpu()"));
  if (tensor.layout() != c10::kStrided)
    throw InvalidArgument(concat("to_rpc: a tensor of layout ", tensor.layout(),
                                 ", and lockstep rpc carries dense (strided) tensors: send its "
                                 ".to_dense()"));
  const rpc::ElementType type = element_type_of(tensor.scalar_type());
  // Only the data goes (no autograd history). A conj or neg view keeps its bit beside bytes that
  // do not have it applied: resolve it, or the receiver would get the unconjugated values.
  at::Tensor t = tensor.detach().resolve_conj().resolve_neg().contiguous();
  rpc::Tensor out;
  out.type = type;
  out.shape = t.sizes().vec();
  out.data = static_cast<const std::byte*>(t.const_data_ptr());
  out.nbytes = t.nbytes();
  out.owner = std::make_shared<const at::Tensor>(std::move(t));
  return out;
}

at::Tensor from_rpc(const rpc::Tensor& tensor) {
  const c10::ScalarType type = scalar_type_of(tensor.type);
  int64_t numel = 1;
  for (int64_t d : tensor.shape) {
    if (d < 0)
      throw InvalidArgument(concat("from_rpc: a negative dimension (", d, ") in a tensor of ",
                                   tensor.shape.size(), " dimensions"));
    if (__builtin_mul_overflow(numel, d, &numel))
      throw InvalidArgument(concat("from_rpc: a shape of more than 2^63 elements"));
  }
  const size_t expected = static_cast<size_t>(numel) * rpc::element_bytes(tensor.type);
  if (tensor.nbytes != expected)
    throw InvalidArgument(concat("from_rpc: a ", rpc::element_name(tensor.type), " tensor of ",
                                 numel, " elements has ", expected, " bytes, but nbytes is ",
                                 tensor.nbytes));
  const auto options = at::TensorOptions().dtype(type);
  if (numel == 0) return at::empty(tensor.shape, options);  // nothing to share
  if (!tensor.data)
    throw InvalidArgument(concat("from_rpc: a tensor of ", numel, " elements with no data"));
  // The deleter owns a reference to the bytes' owner: the storage keeps them alive.
  return at::from_blob(
      const_cast<std::byte*>(tensor.data), tensor.shape,
      [owner = tensor.owner](void*) mutable { owner.reset(); }, options);
}

}  // namespace lockstep::torch
