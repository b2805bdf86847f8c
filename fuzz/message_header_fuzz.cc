// The 48-byte header of every message on a collectives data connection
// (src/algorithms/message_header.h): header_is_valid, the first check of any received frame, and
// header_mismatch, which compares a received data header with the one this rank's op expects
// and words the MismatchError (tcp and shm backends).
//
// Input: the received header's 48 bytes as they come off the wire, then what picks this rank's
// op (kind, dtype, sizes...: a well-formed local op, since only the header crosses the wire).
// Checked: nothing crashes, and a header built from the local op itself never mismatches.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>

#include "algorithms/message_header.h"
#include "fuzz_input.h"

namespace {

using namespace lockstep;

template <class Enum>
Enum pick(FuzzedDataProvider& in, Enum last) {
  return static_cast<Enum>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(last)));
}

Op local_op(FuzzedDataProvider& in) {
  Op op;
  op.kind = pick(in, OpKind::recv);
  op.variable = in.ConsumeBool();
  op.seq = in.ConsumeIntegral<uint64_t>();
  op.dtype = pick(in, DType::boolean);
  op.reduce_op = pick(in, ReduceOp::bxor);
  op.root = in.ConsumeIntegralInRange<int>(0, 1 << 16);
  op.peer = in.ConsumeIntegralInRange<int>(0, 1 << 16);
  op.tag = in.ConsumeIntegral<uint32_t>();
  op.algorithm = pick(in, Algorithm::direct);
  op.count = in.ConsumeIntegralInRange<size_t>(0, size_t{1} << 40);
  const size_t ranks = in.ConsumeIntegralInRange<size_t>(0, 16);
  for (size_t r = 0; r < ranks; ++r) {
    op.counts.push_back(in.ConsumeIntegralInRange<size_t>(0, size_t{1} << 40));
    op.recv_counts.push_back(in.ConsumeIntegralInRange<size_t>(0, size_t{1} << 40));
  }
  return op;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(MessageHeader)) return 0;
  MessageHeader got;
  std::memcpy(&got, data, sizeof got);  // as the backends read it off the stream
  FuzzedDataProvider in(data + sizeof got, size - sizeof got);
  const Op op = local_op(in);
  const uint64_t expected = in.ConsumeIntegral<uint64_t>();
  const HeaderCheck check{.op = op, .rank = 0, .peer = in.ConsumeIntegralInRange<int>(1, 1 << 16)};
  if (header_is_valid(got) && got.frame == FrameType::data)
    (void)header_mismatch(got, expected, check);
  if (header_mismatch(data_header(op, expected), expected, check))
    fuzz::broken("an op's own header mismatches it");
  return 0;
}
