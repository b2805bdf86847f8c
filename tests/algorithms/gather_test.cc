// all_gather(_v), gather(_v), scatter(_v) and reduce_scatter(_v) over world sizes 1..5 and 8,
// with uniform counts and with uneven counts that include zeros, in and out of place.
#include <gtest/gtest.h>

#include <numeric>

#include "mesh_harness.h"

namespace lockstep::testing {
namespace {

// Per-rank counts: uniform `k`, or uneven (rank r gets (r * 7 + k) % 11, so some are zero).
std::vector<size_t> counts_for(int n, size_t k, bool uneven) {
  std::vector<size_t> c(static_cast<size_t>(n), k);
  if (uneven)
    for (int r = 0; r < n; ++r) c[static_cast<size_t>(r)] = (static_cast<size_t>(r) * 7 + k) % 11;
  return c;
}

size_t offset_of(const std::vector<size_t>& c, int r) {
  return std::accumulate(c.begin(), c.begin() + r, size_t{0});
}
size_t total(const std::vector<size_t>& c) {
  return std::accumulate(c.begin(), c.end(), size_t{0});
}

// Which rank's slot element i of a concatenation falls in.
int owner(const std::vector<size_t>& c, size_t i) {
  int r = 0;
  while (i >= c[static_cast<size_t>(r)]) i -= c[static_cast<size_t>(r++)];
  return r;
}

// The value rank r contributes at its local element j: identifies both.
double mark(int r, size_t j) {
  return r * 100000.0 + static_cast<double>(j % 100000);
}

struct Shape {
  size_t k;
  bool uneven;
};
constexpr Shape kShapes[] = {{0, false},      {1, false}, {7, false}, {1000, false},
                             {250001, false}, {0, true},  {3, true},  {1000, true}};

void check_all_gather(MeshRank& me, OpKind kind, const Shape& s, bool in_place) {
  auto counts = counts_for(me.size, s.k, s.uneven);
  const size_t mine = counts[static_cast<size_t>(me.rank)], off = offset_of(counts, me.rank);
  TypedBuffer out(DType::f32, total(counts)), in(DType::f32, mine);
  out.fill([](size_t) { return -1; });
  TypedBuffer& src = in_place ? out : in;
  for (size_t j = 0; j < mine; ++j) src.set((in_place ? off : 0) + j, mark(me.rank, j));
  Op op = me.op(kind);
  op.variable = s.uneven;
  op.counts = counts;
  op.root = me.size - 1;
  op.input = in_place ? out.slice(off, mine).data : in.view().data;
  op.output = out.view().data;
  me.run(op);
  if (kind == OpKind::gather && me.rank != op.root) return;
  expect_elements(
      out,
      [&](size_t i) {
        int r = owner(counts, i);
        return mark(r, i - offset_of(counts, r));
      },
      detail::concat(op_kind_name(kind), s.uneven ? "_v" : "", " k=", s.k, " n=", me.size));
}

void check_scatter(MeshRank& me, const Shape& s, int root) {
  auto counts = counts_for(me.size, s.k, s.uneven);
  TypedBuffer in(DType::i64, total(counts)), out(DType::i64, counts[static_cast<size_t>(me.rank)]);
  in.fill([&](size_t i) { return me.rank == root ? mark(owner(counts, i), i) : -3; });
  Op op = me.op(OpKind::scatter);
  op.dtype = DType::i64;
  op.variable = s.uneven;
  op.counts = counts;
  op.root = root;
  op.input = in.view().data;
  op.output = out.view().data;
  me.run(op);
  const size_t off = offset_of(counts, me.rank);
  expect_elements(
      out, [&](size_t j) { return mark(me.rank, off + j); },
      detail::concat("scatter k=", s.k, " root ", root, " n=", me.size));
}

void check_reduce_scatter(MeshRank& me, const Shape& s, DType t, ReduceOp rop = ReduceOp::sum) {
  auto counts = counts_for(me.size, s.k, s.uneven);
  const size_t mine = counts[static_cast<size_t>(me.rank)], off = offset_of(counts, me.rank);
  TypedBuffer in(t, total(counts)), out(t, mine);
  in.fill([&](size_t i) { return rank_value(me.rank, i); });
  out.fill([](size_t) { return -1; });
  Op op = me.op(OpKind::reduce_scatter);
  op.dtype = t;
  op.reduce_op = rop;
  op.variable = s.uneven;
  op.counts = counts;
  op.input = in.view().data;
  op.output = out.view().data;
  me.run(op);
  const double divisor = rop == ReduceOp::avg ? me.size : 1;
  expect_elements(
      out, [&](size_t j) { return rank_value_sum(me.size, off + j) / divisor; },
      detail::concat("reduce_scatter ", dtype_name(t), " ", reduce_op_name(rop), " k=", s.k,
                     " n=", me.size));
  expect_elements(
      in, [&](size_t i) { return rank_value(me.rank, i); }, "reduce_scatter input");
}

class Gathers : public ::testing::TestWithParam<int> {};

TEST_P(Gathers, AllGatherUniformAndUnevenInAndOutOfPlace) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (const Shape& s : kShapes)
      for (bool in_place : {false, true}) check_all_gather(me, OpKind::all_gather, s, in_place);
  });
}

TEST_P(Gathers, GatherToLastRank) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (const Shape& s : kShapes)
      for (bool in_place : {false, true}) check_all_gather(me, OpKind::gather, s, in_place);
  });
}

TEST_P(Gathers, ScatterFromFirstAndLastRank) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (const Shape& s : kShapes)
      for (int root : {0, me.size - 1}) check_scatter(me, s, root);
  });
}

TEST_P(Gathers, ReduceScatterUniformAndUneven) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (const Shape& s : kShapes)
      for (DType t : {DType::f32, DType::i64}) check_reduce_scatter(me, s, t);
  });
}

// avg divides the owned chunk once; 16-bit floats accumulate in f32 and narrow into the output.
TEST_P(Gathers, ReduceScatterAvgAndSixteenBitFloats) {
  with_mesh(GetParam(), [](MeshRank& me) {
    for (const Shape& s : {Shape{1000, false}, Shape{3, true}}) {
      check_reduce_scatter(me, s, DType::f32, ReduceOp::avg);
      check_reduce_scatter(me, s, DType::f16);
      check_reduce_scatter(me, s, DType::bf16, ReduceOp::avg);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Gathers, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace lockstep::testing
