// MemoryTransport (src/testing/memory_transport.h) from one thread, two or three endpoints on one
// FaultController: payloads arrive intact and in post order; a header another op wrote is the tcp
// transport's MismatchError (header_mismatch) before any payload byte is copied; a cut connection
// fails a wait with a NetworkError naming the peer, also when this rank reads from another peer,
// and a send on it at once; a peer's abort frame is relayed with its class; a peer's bye while
// its message is awaited is a NetworkError; a message that never comes is a TimeoutError at the
// op's deadline, naming the peer; a dropped message is never delivered.
#include "testing/memory_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::testing {
namespace {

Op all_reduce_op(size_t count, uint64_t seq = 1) {
  Op op;
  op.kind = OpKind::all_reduce;
  op.seq = seq;
  op.count = count;
  op.deadline = Deadline::after(std::chrono::seconds(60));
  return op;
}

// The error text fn throws as E; fails the test when it throws nothing or something else.
template <class E, class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

struct Pair {
  std::shared_ptr<FaultController> faults = std::make_shared<FaultController>(2);
  MemoryTransport a{faults, 0}, b{faults, 1};
};

TEST(MemoryTransport, PayloadsArriveIntactAndInPostOrder) {
  Pair p;
  Op op = all_reduce_op(3);
  p.a.begin_op(op);
  p.b.begin_op(op);
  const float first[3] = {1, 2, 3}, second[3] = {4, 5, 6};
  p.b.wait(p.b.post_send(0, first, sizeof first));
  p.b.post_send(0, second, sizeof second);
  float got1[3] = {}, got2[3] = {};
  auto r1 = p.a.post_recv(1, got1, sizeof got1);
  auto r2 = p.a.post_recv(1, got2, sizeof got2);
  p.a.wait(r2);
  p.a.wait(r1);
  EXPECT_EQ(std::vector<float>(got1, got1 + 3), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(std::vector<float>(got2, got2 + 3), (std::vector<float>{4, 5, 6}));
  p.a.wait_all();
}

TEST(MemoryTransport, AHeaderOfAnotherOpIsTheTcpTransportsMismatchError) {
  Pair p;
  Op mine = all_reduce_op(4), theirs = all_reduce_op(8);
  p.a.begin_op(mine);
  p.b.begin_op(theirs);
  const float data[8] = {};
  p.b.post_send(0, data, sizeof data);
  float got[4] = {7, 7, 7, 7};
  auto r = p.a.post_recv(1, got, sizeof got);
  EXPECT_EQ(error_of<MismatchError>([&] { p.a.wait(r); }),
            "all_reduce #1: rank 1 sent 32 bytes, rank 0 expected 16 (8 vs 4 f32 elements). Fix: "
            "make every rank pass the same count (and the same dtype)");
  EXPECT_EQ(got[0], 7.0f);  // not a byte copied
}

TEST(MemoryTransport, ACutFailsTheWaitNamingThePeerEvenWhenReadingFromAnother) {
  auto faults = std::make_shared<FaultController>(3);
  MemoryTransport t0(faults, 0), t1(faults, 1), t2(faults, 2);
  Op op = all_reduce_op(1);
  t0.begin_op(op);
  t2.begin_op(op);
  float x = 0;
  auto r = t0.post_recv(1, &x, sizeof x);  // from rank 1; the cut is with rank 2
  faults->cut(0, 2);
  EXPECT_EQ(error_of<NetworkError>([&] { t0.wait(r); }),
            "all_reduce #1: lost connection to rank 2: the link between rank 0 and rank 2 was cut "
            "by the fault controller");
  EXPECT_EQ(error_of<NetworkError>([&] { t2.post_send(0, &x, sizeof x); }),
            "all_reduce #1: lost connection to rank 0: the link between rank 0 and rank 2 was cut "
            "by the fault controller");
}

TEST(MemoryTransport, APeersAbortIsRelayedWithItsClass) {
  Pair p;
  Op op = all_reduce_op(1);
  p.a.begin_op(op);
  float x = 0;
  auto r = p.a.post_recv(1, &x, sizeof x);
  p.b.abort(ErrorClass::mismatch, "all_reduce #1: rank 1 saw a mismatch");
  EXPECT_EQ(error_of<MismatchError>([&] { p.a.wait(r); }),
            "all_reduce #1: rank 1 saw a mismatch (relayed by rank 1 to rank 0 in all_reduce #1)");
}

TEST(MemoryTransport, AByeWhileAMessageIsAwaitedIsANetworkError) {
  Pair p;
  Op op = all_reduce_op(1);
  p.a.begin_op(op);
  float x = 0;
  auto r = p.a.post_recv(1, &x, sizeof x);
  p.b.goodbye();
  EXPECT_EQ(error_of<NetworkError>([&] { p.a.wait(r); }),
            "rank 1 shut down its process group while rank 0 waits in all_reduce #1 (ranks called "
            "different numbers of collectives?). Fix: every rank must issue the same collectives "
            "before destroying the group");
}

TEST(MemoryTransport, ADroppedMessageIsATimeoutAtTheDeadlineNamingThePeer) {
  Pair p;
  Op op = all_reduce_op(1);
  op.deadline = Deadline::after(std::chrono::milliseconds(0));  // passed: no waiting
  p.a.begin_op(op);
  p.b.begin_op(op);
  p.faults->drop_next(1, 0);
  float x = 1, y = 0;
  p.b.post_send(0, &x, sizeof x);
  EXPECT_EQ(p.faults->dropped(1, 0), 1u);
  auto r = p.a.post_recv(1, &y, sizeof y);
  std::string text = error_of<TimeoutError>([&] { p.a.wait(r); });
  EXPECT_NE(text.find("timed out on rank 0; still waiting for data from rank 1 (1 message(s))"),
            std::string::npos)
      << text;
  EXPECT_EQ(y, 0.0f);
}

}  // namespace
}  // namespace lockstep::testing
