// run_collective: picks the algorithm for an op and adapts the op to it: world size 1 and empty
// ops need no messages; a reduction follows its ReductionPlan (src/comm/reduction_plan.h): avg
// runs as sum and divides once, and where the plan widens, the f32 algorithm runs on a widened
// copy in scratch and the result is narrowed back.
#include <cstring>
#include <numeric>

#include "algorithms/algorithms.h"
#include "comm/reduction_plan.h"
#include "comm/validate.h"
#include "core/reduce.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

size_t total(const std::vector<size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

// One rank: every collective is a copy.
void run_local(const Op& op) {
  const size_t es = element_size(op.dtype);
  size_t bytes = 0;
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::broadcast:
    case OpKind::reduce:
      bytes = op.count * es;
      break;
    case OpKind::all_gather:
    case OpKind::gather:
    case OpKind::scatter:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      bytes = op.counts.empty() ? 0 : op.counts[0] * es;
      break;
    case OpKind::barrier:
      return;
    case OpKind::send:
    case OpKind::recv:
      throw InvalidArgument(op.name() + ": a group of one rank has no peer to talk to");
  }
  if (bytes > 0 && op.input != op.output) std::memmove(op.output, op.input, bytes);
}

void all_reduce(Transport& t, Scratch& s, const Op& op, int divisor) {
  if (choose_all_reduce(op, t.size()) == Algorithm::ring) {
    all_reduce_ring(t, s, op, divisor);
    return;
  }
  all_reduce_recursive_doubling(t, s, op);
  if (divisor > 0) finish_average(op.output, op.count, op.dtype, divisor);
}

void reduce(Transport& t, Scratch& s, const Op& op, int divisor) {
  if (ring_pays_off(op, t.size()))
    reduce_ring(t, s, op);
  else
    reduce_tree(t, s, op);
  if (divisor > 0 && t.rank() == op.root) finish_average(op.output, op.count, op.dtype, divisor);
}

// all_reduce, reduce and reduce_scatter, as their ReductionPlan says.
void run_reduction(Transport& t, Scratch& s, const Op& op) {
  const ReductionPlan plan = plan_reduction(op.dtype, op.reduce_op, t.size());
  Op w = op;
  w.reduce_op = plan.combine;
  const int divisor = plan.divisor;
  const bool widen = plan.widen;
  size_t in_count = op.kind == OpKind::reduce_scatter ? total(op.counts) : op.count;
  size_t out_count =
      op.kind == OpKind::reduce_scatter ? op.counts[static_cast<size_t>(t.rank())] : op.count;
  if (widen) {
    w.dtype = DType::f32;
    auto* in = static_cast<float*>(s.get(Scratch::kWideIn, in_count * 4));
    widen_to_f32(in, op.input, in_count, op.dtype);
    w.input = in;
    w.output = op.kind == OpKind::reduce_scatter ? s.get(Scratch::kWideOut, out_count * 4) : in;
  }
  switch (op.kind) {
    case OpKind::all_reduce:
      all_reduce(t, s, w, divisor);
      break;
    case OpKind::reduce:
      reduce(t, s, w, divisor);
      break;
    default:
      reduce_scatter_ring(t, s, w, divisor);
      break;
  }
  const bool has_result = op.kind != OpKind::reduce || t.rank() == op.root;
  if (widen && has_result)
    narrow_from_f32(op.output, static_cast<const float*>(w.output), out_count, op.dtype);
}

}  // namespace

bool ring_pays_off(const Op& op, int size) {
  const size_t threshold = size >= kWideGroup ? kWideRingThresholdBytes : kRingThresholdBytes;
  return op.count * element_size(op.dtype) >= threshold;
}

Algorithm choose_all_reduce(const Op& op, int size) {
  validate::algorithm(op);
  if (op.algorithm != Algorithm::automatic) return op.algorithm;
  return ring_pays_off(op, size) ? Algorithm::ring : Algorithm::recursive_doubling;
}

Algorithm choose_broadcast(const Op& op) {
  validate::algorithm(op);
  if (op.algorithm != Algorithm::automatic) return op.algorithm;
  return op.count * element_size(op.dtype) >= kChainThresholdBytes ? Algorithm::chain
                                                                   : Algorithm::tree;
}

void run_collective(Transport& t, Scratch& s, const Op& op) {
  validate::algorithm(op);  // the front end has checked it too; direct callers have not
  if (t.size() == 1) return run_local(op);
  const bool sized = op.kind != OpKind::all_to_all && op.kind != OpKind::barrier &&
                     op.kind != OpKind::send && op.kind != OpKind::recv;
  if (sized && op.agreed_bytes() == 0) return;  // every rank agrees there is nothing to move
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::reduce:
    case OpKind::reduce_scatter:
      return run_reduction(t, s, op);
    case OpKind::broadcast:
      return choose_broadcast(op) == Algorithm::chain ? broadcast_chain(t, op)
                                                      : broadcast_tree(t, op);
    case OpKind::all_gather:
      return all_gather_ring(t, op);
    case OpKind::gather:
      return gather_direct(t, op);
    case OpKind::scatter:
      return scatter_direct(t, op);
    case OpKind::all_to_all:
      return all_to_all_pairwise(t, s, op);
    case OpKind::barrier:
      return barrier_dissemination(t, op);
    case OpKind::send:
    case OpKind::recv:
      reject_p2p(op, "the tcp transport");
  }
}

}  // namespace lockstep
