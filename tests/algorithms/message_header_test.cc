// The header check: which differences it reports, and that each message names both ranks, the
// op, both values and a fix.
#include "algorithms/message_header.h"
#include "support/messages.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

Op all_reduce_op(size_t count, uint64_t seq = 12) {
  Op op;
  op.kind = OpKind::all_reduce;
  op.seq = seq;
  op.count = count;
  return op;
}

std::string mismatch(const Op& sender, const Op& receiver, uint64_t payload, uint64_t expected) {
  auto text = header_mismatch(data_header(sender, payload), expected,
                              {.op = receiver, .rank = 0, .peer = 1});
  return text.value_or("");
}

TEST(MessageHeader, IdenticalOpsAgree) {
  Op op = all_reduce_op(1024);
  EXPECT_FALSE(header_mismatch(data_header(op, 64), 64, {.op = op, .rank = 0, .peer = 1}));
  EXPECT_TRUE(header_is_valid(data_header(op, 64)));
  MessageHeader junk = data_header(op, 64);
  junk.magic = 0x12345678;
  EXPECT_FALSE(header_is_valid(junk));
}

TEST(MessageHeader, CountMismatchNamesBothRanksAndBothSizes) {
  std::string m = mismatch(all_reduce_op(1000), all_reduce_op(1024), 2000, 2048);
  EXPECT_CONTAINS(m, "all_reduce #12: rank 1 sent 4000 bytes, rank 0 expected 4096");
  EXPECT_CONTAINS(m, "1000 vs 1024 f32 elements");
  EXPECT_CONTAINS(m, "Fix: make every rank pass the same count");
}

TEST(MessageHeader, KindMismatchNamesBothOps) {
  Op bcast;
  bcast.kind = OpKind::broadcast;
  bcast.seq = 5;
  bcast.count = 10;
  std::string m = mismatch(bcast, all_reduce_op(10, 5), 40, 40);
  EXPECT_CONTAINS(m, "rank 1 is in broadcast #5 while rank 0 is in all_reduce #5");
}

TEST(MessageHeader, SequenceMismatchNamesBothNumbers) {
  std::string m = mismatch(all_reduce_op(10, 13), all_reduce_op(10, 12), 40, 40);
  EXPECT_CONTAINS(m, "all_reduce #12: rank 1 is at all_reduce #13, rank 0 at #12");
}

TEST(MessageHeader, DtypeReduceOpRootTagAndAlgorithmDifferences) {
  Op a = all_reduce_op(8), b = all_reduce_op(8);
  b.dtype = DType::i32;
  EXPECT_CONTAINS(mismatch(b, a, 32, 32), "rank 1 passes i32 data, rank 0 passes f32");
  b = a;
  b.reduce_op = ReduceOp::max;
  EXPECT_CONTAINS(mismatch(b, a, 32, 32), "rank 1 reduces with max, rank 0 with sum");
  b = a;
  b.algorithm = Algorithm::ring;
  EXPECT_CONTAINS(mismatch(b, a, 32, 32), "rank 1 forces algorithm ring");
  b = a;
  b.tag = 3;
  EXPECT_CONTAINS(mismatch(b, a, 32, 32), "rank 1 sent tag 3, rank 0 expects tag 0");
  Op r1 = a, r2 = a;
  r1.kind = r2.kind = OpKind::broadcast;
  r1.root = 2;
  EXPECT_CONTAINS(mismatch(r1, r2, 32, 32), "rank 1 uses root 2, rank 0 uses root 0");
  // The root of an all_reduce means nothing and never mismatches.
  b = a;
  b.root = 3;
  EXPECT_EQ(mismatch(b, a, 32, 32), "");
}

TEST(MessageHeader, VariableCountsArraysWithTheSameTotalDiffer) {
  Op a;
  a.kind = OpKind::all_gather;
  a.variable = true;
  a.counts = {1, 2, 3};
  Op b = a;
  b.counts = {3, 2, 1};
  EXPECT_CONTAINS(mismatch(b, a, 4, 4), "pass different counts arrays");
  Op uniform = a;
  uniform.variable = false;
  uniform.counts = {2, 2, 2};
  EXPECT_CONTAINS(mismatch(uniform, a, 4, 4),
                  "rank 1 called all_gather, rank 0 called all_gather_v");
}

TEST(MessageHeader, SendRecvSizeMismatch) {
  Op send;
  send.kind = OpKind::send;
  send.seq = 3;
  send.peer = 0;
  send.count = 10;
  Op recv = send;
  recv.kind = OpKind::recv;
  recv.peer = 1;
  recv.count = 12;
  std::string m = mismatch(send, recv, 40, 48);
  EXPECT_CONTAINS(m, "recv #3 from rank 1: rank 1 sent 40 bytes, rank 0 expected 48");
  EXPECT_CONTAINS(m, "a send and its recv must have the same count");
}

TEST(MessageHeader, AllToAllPairMismatch) {
  Op a;
  a.kind = OpKind::all_to_all;
  a.seq = 4;
  EXPECT_CONTAINS(mismatch(a, a, 400, 800), "rank 1 sends 400 bytes to rank 0, which expects 800");
}

}  // namespace
}  // namespace lockstep
