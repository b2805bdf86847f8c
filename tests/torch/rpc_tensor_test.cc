// at::Tensor <-> rpc::Tensor (lockstep/torch/rpc_tensor.h): every element type both ways with its
// values, shape and dtype; no copy either way (the bytes are the same memory) and the lifetimes
// that makes safe (an rpc::Tensor keeps the at::Tensor's storage, an at::Tensor keeps the
// rpc::Tensor's owner); views (strided, conj, neg) sent with the values they show; a message
// encoded, "received" into buffers of its own and decoded back; and the errors, each naming what
// is wrong.
#include "lockstep/torch/rpc_tensor.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "rpc/codec.h"
#include "rpc/message.h"
#include "support/messages.h"

namespace lockstep::torch {
namespace {

using lockstep::testing::expect_error_naming;

struct TypePair {
  rpc::ElementType element;
  c10::ScalarType scalar;
};
const std::vector<TypePair> kTypes = {
    {rpc::ElementType::f32, c10::kFloat},        {rpc::ElementType::f64, c10::kDouble},
    {rpc::ElementType::f16, c10::kHalf},         {rpc::ElementType::bf16, c10::kBFloat16},
    {rpc::ElementType::i8, c10::kChar},          {rpc::ElementType::u8, c10::kByte},
    {rpc::ElementType::i16, c10::kShort},        {rpc::ElementType::i32, c10::kInt},
    {rpc::ElementType::i64, c10::kLong},         {rpc::ElementType::boolean, c10::kBool},
    {rpc::ElementType::c64, c10::kComplexFloat}, {rpc::ElementType::c128, c10::kComplexDouble}};

// A [2, 3, 4] tensor of `type` whose elements all differ (where the type allows).
at::Tensor sample(c10::ScalarType type) {
  at::Tensor t = ::torch::arange(24, ::torch::kDouble).reshape({2, 3, 4}) - 5;
  if (type == c10::kBool) return t.remainder(3).eq(0);
  if (type == c10::kComplexFloat || type == c10::kComplexDouble)
    return ::torch::complex(t, t * 0.5 + 1).to(type);
  return t.to(type);
}

TEST(RpcTensor, EveryElementTypeBothWaysWithoutCopies) {
  ASSERT_EQ(kTypes.size(), static_cast<size_t>(rpc::kElementTypes));
  for (const auto& [element, scalar] : kTypes) {
    SCOPED_TRACE(c10::toString(scalar));
    EXPECT_EQ(scalar_type_of(element), scalar);
    EXPECT_EQ(element_type_of(scalar), element);
    const at::Tensor t = sample(scalar);
    const rpc::Tensor r = to_rpc(t);
    EXPECT_EQ(r.type, element);
    EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(r.nbytes, 24 * rpc::element_bytes(element));
    EXPECT_EQ(static_cast<const void*>(r.data), t.const_data_ptr());  // the tensor's own bytes
    const at::Tensor back = from_rpc(r);
    EXPECT_EQ(back.scalar_type(), scalar);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_EQ(back.const_data_ptr(), static_cast<const void*>(r.data));  // and again
    EXPECT_TRUE(::torch::equal(back, t));
  }
}

TEST(RpcTensor, ScalarsAndEmptyTensors) {
  const at::Tensor scalar = ::torch::tensor(2.5);
  const rpc::Tensor r = to_rpc(scalar);
  EXPECT_TRUE(r.shape.empty());
  EXPECT_EQ(r.numel(), 1);
  EXPECT_EQ(from_rpc(r).item<double>(), 2.5);
  EXPECT_EQ(from_rpc(r).dim(), 0);

  const at::Tensor empty = ::torch::zeros({3, 0, 2}, ::torch::kInt);
  const rpc::Tensor e = to_rpc(empty);
  EXPECT_EQ(e.nbytes, 0u);
  EXPECT_EQ(e.shape, (std::vector<int64_t>{3, 0, 2}));
  const at::Tensor back = from_rpc(e);
  EXPECT_EQ(back.sizes(), empty.sizes());
  EXPECT_EQ(back.scalar_type(), c10::kInt);
  // An empty rpc::Tensor may have no data at all.
  EXPECT_EQ(from_rpc(rpc::Tensor{rpc::ElementType::f64, {0}, nullptr, 0, nullptr}).numel(), 0);
}

TEST(RpcTensor, TheRpcTensorKeepsTheStorageAlive) {
  rpc::Tensor r;
  std::weak_ptr<const void> owner;
  {
    at::Tensor t = ::torch::arange(1000, ::torch::kFloat);
    r = to_rpc(t);
    owner = r.owner;
  }  // the only at::Tensor is gone: the rpc::Tensor's owner holds the storage
  ASSERT_FALSE(owner.expired());
  EXPECT_EQ(r.as<float>()[999], 999.0f);
  r = rpc::Tensor{};
  EXPECT_TRUE(owner.expired());
}

TEST(RpcTensor, TheAtTensorKeepsTheOwnerAlive) {
  at::Tensor t;
  std::weak_ptr<const void> owner;
  {
    rpc::Tensor r = rpc::Tensor::from(std::vector<float>{1, 2, 3});
    owner = r.owner;
    t = from_rpc(r);
  }  // the rpc::Tensor is gone: the at::Tensor's storage holds its owner
  ASSERT_FALSE(owner.expired());
  EXPECT_TRUE(::torch::equal(t, ::torch::tensor({1.0f, 2.0f, 3.0f})));
  at::Tensor view = t.slice(0, 1);  // a view shares the storage, and so the owner
  t = at::Tensor();
  ASSERT_FALSE(owner.expired());
  EXPECT_EQ(view[0].item<float>(), 2.0f);
  view = at::Tensor();
  EXPECT_TRUE(owner.expired());
}

TEST(RpcTensor, FromRpcAliasesTheBytes) {
  rpc::Tensor r = rpc::Tensor::zeros(rpc::ElementType::i64, {4});
  at::Tensor t = from_rpc(r);
  t.fill_(7);  // a tensor this process made (or received) is its own to write
  EXPECT_EQ(r.as<int64_t>()[3], 7);
}

TEST(RpcTensor, ViewsTravelWithTheValuesTheyShow) {
  // Strided: a transposed tensor is not contiguous; its values go in row-major order (a copy).
  const at::Tensor base = ::torch::arange(6, ::torch::kFloat).reshape({2, 3});
  const at::Tensor transposed = base.t();
  const rpc::Tensor r = to_rpc(transposed);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(::torch::equal(from_rpc(r), transposed));
  EXPECT_NE(static_cast<const void*>(r.data), base.const_data_ptr());
  // An offset view that is contiguous is sent from the base's bytes, at its offset.
  const at::Tensor row = base[1];
  EXPECT_EQ(static_cast<const void*>(to_rpc(row).data), row.const_data_ptr());
  EXPECT_TRUE(::torch::equal(from_rpc(to_rpc(row)), row));
  // Conj and neg views keep a bit beside unchanged bytes: what goes is the values they show.
  const at::Tensor z = sample(c10::kComplexFloat);
  const at::Tensor conj = z.conj();
  ASSERT_TRUE(conj.is_conj());
  EXPECT_TRUE(::torch::equal(from_rpc(to_rpc(conj)), conj.resolve_conj()));
  const at::Tensor neg = ::torch::_neg_view(base);
  ASSERT_TRUE(neg.is_neg());
  EXPECT_TRUE(::torch::equal(from_rpc(to_rpc(neg)), -base));
  // A parameter goes as its data, without its autograd history.
  const at::Tensor w = ::torch::ones({2}, ::torch::requires_grad());
  EXPECT_FALSE(from_rpc(to_rpc(w * 3)).requires_grad());
  EXPECT_TRUE(::torch::equal(from_rpc(to_rpc(w * 3)), ::torch::full({2}, 3.0f)));
}

TEST(RpcTensor, ThroughAMessageReceivedIntoBuffersOfItsOwn) {
  // Encoded as a call's arguments would be, then "received": each blob copied into a buffer of
  // its own, as the frame reader does, and the sender's tensors dropped.
  rpc::Message received;
  {
    rpc::Message sent;
    rpc::encode(rpc::Value(rpc::List{rpc::Value(to_rpc(sample(c10::kFloat))),
                                     rpc::Value(to_rpc(sample(c10::kComplexDouble)))}),
                sent);
    received.body = sent.body;
    for (const rpc::Blob& b : sent.blobs) {
      rpc::Blob copy = rpc::allocate_blob(b.nbytes);
      std::memcpy(const_cast<std::byte*>(copy.data), b.data, b.nbytes);
      received.blobs.push_back(std::move(copy));
    }
  }
  rpc::Reader reader(received);
  const rpc::Value v = rpc::decode(reader);
  ASSERT_TRUE(reader.at_end());
  const at::Tensor a = from_rpc(v.as_list().at(0).as_tensor());
  const at::Tensor b = from_rpc(v.as_list().at(1).as_tensor());
  EXPECT_EQ(a.const_data_ptr(), static_cast<const void*>(received.blobs[0].data));
  received = rpc::Message{};  // the tensors hold the buffers
  EXPECT_TRUE(::torch::equal(a, sample(c10::kFloat)));
  EXPECT_TRUE(::torch::equal(b, sample(c10::kComplexDouble)));
  // And Value's structural equality agrees with torch's.
  EXPECT_EQ(rpc::Value(to_rpc(a)), rpc::Value(to_rpc(sample(c10::kFloat))));
}

TEST(RpcTensor, ErrorsNameWhatIsWrong) {
  expect_error_naming<InvalidArgument>([] { to_rpc(at::Tensor()); }, {"an undefined tensor"});
  // A dtype without an element type is named.
  expect_error_naming<InvalidArgument>(
      [] { to_rpc(::torch::zeros({2}, ::torch::TensorOptions().dtype(c10::kUInt16))); },
      {"to_rpc: a tensor of dtype UInt16", "does not carry", "ComplexDouble"});
  expect_error_naming<InvalidArgument>([] { element_type_of(c10::kFloat8_e4m3fn); },
                                       {"dtype Float8_e4m3fn"});
  expect_error_naming<InvalidArgument>([] { to_rpc(::torch::eye(3).to_sparse()); },
                                       {"layout Sparse", ".to_dense()"});
  // A meta tensor has no bytes on the CPU (as a CUDA one has none there).
  expect_error_naming<InvalidArgument>([] { to_rpc(::torch::zeros({2}, ::torch::kMeta)); },
                                       {"a tensor on meta", "carries CPU tensors"});

  expect_error_naming<InvalidArgument>(
      [] {
        from_rpc(rpc::Tensor{static_cast<rpc::ElementType>(12), {1}, nullptr, 4, nullptr});
      },
      {"element type 12 is none of lockstep rpc's 12"});
  rpc::Tensor short_bytes = rpc::Tensor::zeros(rpc::ElementType::f64, {3});
  short_bytes.nbytes = 16;
  expect_error_naming<InvalidArgument>(
      [&] { from_rpc(short_bytes); },
      {"a float64 tensor of 3 elements has 24 bytes, but nbytes is 16"});
  expect_error_naming<InvalidArgument>(
      [] {
        from_rpc(rpc::Tensor{rpc::ElementType::f32, {2, -1}, nullptr, 0, nullptr});
      },
      {"a negative dimension (-1)"});
  expect_error_naming<InvalidArgument>(
      [] {
        from_rpc(rpc::Tensor{rpc::ElementType::u8, {5}, nullptr, 5, nullptr});
      },
      {"a tensor of 5 elements with no data"});
}

}  // namespace
}  // namespace lockstep::torch
