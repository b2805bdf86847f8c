// all_to_all(_v), barrier and send/recv over world sizes 1..5 and 8.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "mesh_harness.h"

namespace lockstep::testing {
namespace {

// Elements rank i sends to rank j: uniform k, or uneven (some zero).
size_t pair_count(int i, int j, size_t k, bool uneven) {
  return uneven ? static_cast<size_t>(i * 3 + j * 5 + static_cast<int>(k)) % 7 : k;
}
double mark(int from, int to, size_t j) {
  return from * 1e6 + to * 1e4 + static_cast<double>(j % 10000);
}

void check_all_to_all(MeshRank& me, size_t k, bool uneven, bool in_place) {
  const int n = me.size;
  std::vector<size_t> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    send[static_cast<size_t>(j)] = pair_count(me.rank, j, k, uneven);
    recv[static_cast<size_t>(j)] = pair_count(j, me.rank, k, uneven);
  }
  size_t send_total = std::accumulate(send.begin(), send.end(), size_t{0});
  size_t recv_total = std::accumulate(recv.begin(), recv.end(), size_t{0});
  if (in_place && uneven) return;  // in place needs equal send and recv totals on every rank
  TypedBuffer in(DType::f64, send_total), out(DType::f64, recv_total);
  size_t pos = 0;
  for (int j = 0; j < n; ++j)
    for (size_t e = 0; e < send[static_cast<size_t>(j)]; ++e) in.set(pos++, mark(me.rank, j, e));
  Op op = me.op(OpKind::all_to_all);
  op.dtype = DType::f64;
  op.variable = uneven;
  op.counts = send;
  op.recv_counts = recv;
  op.input = in.view().data;
  op.output = in_place ? in.view().data : out.view().data;
  me.run(op);
  TypedBuffer& result = in_place ? in : out;
  pos = 0;
  for (int i = 0; i < n; ++i)
    for (size_t e = 0; e < recv[static_cast<size_t>(i)]; ++e, ++pos)
      ASSERT_EQ(result.get(pos), mark(i, me.rank, e))
          << "all_to_all k=" << k << (uneven ? " uneven" : "") << " n=" << n << " from " << i;
}

class Exchanges : public ::testing::TestWithParam<int> {};

TEST_P(Exchanges, AllToAllUniformAndUneven) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (size_t k : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100003}})
      for (bool uneven : {false, true})
        for (bool in_place : {false, true}) check_all_to_all(me, k, uneven, in_place);
  });
}

// Each rank records when it entered; nobody may leave before the last one has entered.
TEST_P(Exchanges, BarrierHoldsEveryRankUntilTheLastEnters) {
  const int n = GetParam();
  std::atomic<int> entered{0};
  with_mesh(n, [&](MeshRank& me) {
    for (int round = 0; round < 3; ++round) {
      if (me.rank == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      entered++;
      me.run(me.op(OpKind::barrier));
      EXPECT_GE(entered.load(), (round + 1) * n) << "rank " << me.rank << " left barrier early";
      me.run(me.op(OpKind::barrier));  // nobody starts the next round before all checked
    }
  });
}

TEST(TransportReadAhead, EmptyMessageBehindALargeOneIsDeliveredWithoutPolling) {
  with_mesh(2, [](MeshRank& me) {
    std::vector<char> big(1 << 20, 'x');
    Op op = me.op(OpKind::barrier);
    op.deadline = Deadline::after(std::chrono::seconds(5));
    me.run(op, [&] {
      if (me.rank == 0) {
        me.transport->post_send(1, big.data(), big.size());
        me.transport->post_send(1, nullptr, 0);
        me.transport->wait_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // sends nothing more
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both messages are queued
      me.transport->wait(me.transport->post_recv(0, big.data(), big.size()));
      auto start = Clock::now();
      me.transport->wait(me.transport->post_recv(0, nullptr, 0));
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
    });
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Exchanges, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace lockstep::testing
