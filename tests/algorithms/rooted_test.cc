// broadcast (tree and chain, forced and automatic) and reduce (tree and ring-then-gather), from
// every root position, over world sizes 1..5 and 8, against closed forms.
#include <gtest/gtest.h>

#include "mesh_harness.h"

namespace lockstep::testing {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1000, 1000003};

std::vector<int> roots(int n) {
  return n == 1 ? std::vector<int>{0} : std::vector<int>{0, n - 1, n / 2};
}

void check_broadcast(MeshRank& me, Algorithm a, DType t, size_t count, int root, bool in_place) {
  TypedBuffer in(t, count), out(t, count);
  in.fill([&](size_t i) { return me.rank == root ? rank_value(root, i) + 1 : -1; });
  out.fill([](size_t) { return -2; });
  Op op = me.op(OpKind::broadcast);
  op.dtype = t;
  op.count = count;
  op.root = root;
  op.algorithm = a;
  op.input = in.view().data;
  op.output = in_place ? in.view().data : out.view().data;
  me.run(op);
  expect_elements(
      in_place ? in : out, [&](size_t i) { return rank_value(root, i) + 1; },
      detail::concat("broadcast ", algorithm_name(a), " x ", count, " root ", root,
                     " n=", me.size));
}

void check_reduce(MeshRank& me, const std::function<void(const Op&)>& algorithm, DType t,
                  size_t count, int root) {
  TypedBuffer in(t, count), out(t, count);
  in.fill([&](size_t i) { return rank_value(me.rank, i); });
  out.fill([](size_t) { return -2; });
  Op op = me.op(OpKind::reduce);
  op.dtype = t;
  op.count = count;
  op.root = root;
  op.input = in.view().data;
  op.output = out.view().data;
  me.run(op, [&] { algorithm(op); });
  std::string what = detail::concat("reduce x ", count, " root ", root, " n=", me.size);
  if (me.rank == root)
    expect_elements(
        out, [&](size_t i) { return rank_value_sum(me.size, i); }, what);
  else  // non-root outputs are untouched
    expect_elements(
        out, [](size_t) { return -2; }, what + " (non-root output)");
  expect_elements(
      in, [&](size_t i) { return rank_value(me.rank, i); }, what + " (input)");
}

class Rooted : public ::testing::TestWithParam<int> {};

TEST_P(Rooted, BroadcastTreeAndChainFromEveryRootPosition) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (Algorithm a : {Algorithm::automatic, Algorithm::tree, Algorithm::chain})
      for (int root : roots(me.size))
        for (size_t count : kCounts)
          check_broadcast(me, a, a == Algorithm::tree ? DType::i64 : DType::f32, count, root,
                          count % 2 == 0);
  });
}

TEST_P(Rooted, ReduceTreeRingAndAutomatic) {
  with_mesh(GetParam(), [](MeshRank& me) {
    auto tree = [&](const Op& op) { reduce_tree(*me.transport, me.scratch, op); };
    auto ring = [&](const Op& op) { reduce_ring(*me.transport, me.scratch, op); };
    auto automatic = [&](const Op& op) { run_collective(*me.transport, me.scratch, op); };
    for (int root : roots(me.size)) {
      for (size_t count : kCounts) {
        if (count > 0 && me.size > 1) {  // the algorithms themselves need a peer and data
          check_reduce(me, tree, DType::f32, count, root);
          check_reduce(me, ring, DType::i64, count, root);
        }
        check_reduce(me, automatic, DType::f32, count, root);
      }
    }
  });
}

TEST_P(Rooted, ReduceInPlaceOnRoot) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (size_t count : {size_t{1000}, size_t{300000}}) {
      TypedBuffer buf(DType::f32, count);
      buf.fill([&](size_t i) { return rank_value(me.rank, i); });
      Op op = me.op(OpKind::reduce);
      op.count = count;
      op.root = me.size - 1;
      op.input = op.output = buf.view().data;
      me.run(op);
      if (me.rank == op.root)
        expect_elements(
            buf, [&](size_t i) { return rank_value_sum(me.size, i); }, "in place");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Rooted, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace lockstep::testing
