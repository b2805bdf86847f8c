#include "backends/hier/all_reduce.h"

#include <cstring>

#include "backends/hier/rank_names.h"
#include "comm/reduction_plan.h"
#include "core/reduce.h"
#include "lockstep/core/error.h"

namespace lockstep::hier {

namespace {

// Runs a stage on this host's shm group, naming ranks of the whole group in its errors.
void run_on_host(const HierAllReduce& h, const Op& user, const Op& stage) {
  try {
    h.host_group->run(stage);
  } catch (const Error& e) {
    rethrow_with_group_ranks(e,
                             detail::concat(user.name(), " (hierarchical: the ",
                                            op_kind_name(stage.kind), " within a host): "),
                             h.host_ranks);
  }
}

// The work op: what stages 1 and 2 reduce, as the whole group's ReductionPlan says (sum for avg;
// an f32 copy of 16-bit data where it widens).
Op work_op(const HierAllReduce& h, const ReductionPlan& plan, const Op& op) {
  Op work = op;
  work.reduce_op = plan.combine;
  if (plan.widen) {
    auto* wide = static_cast<float*>(h.scratch->get(Scratch::kWideIn, op.count * sizeof(float)));
    widen_to_f32(wide, op.input, op.count, op.dtype);
    work.dtype = DType::f32;
    work.input = wide;
    work.output = wide;
  }
  return work;
}

// Stage 1: the host's inputs reduced into the leader's work.output (a copy when alone).
void reduce_within_host(const HierAllReduce& h, const Op& op, const Op& work) {
  if (h.host_group == nullptr) {
    if (work.input != work.output)
      std::memmove(work.output, work.input, work.count * element_size(work.dtype));
    return;
  }
  Op stage = work;
  stage.kind = OpKind::reduce;
  stage.root = 0;
  stage.algorithm = Algorithm::automatic;
  if (h.host_rank != 0) stage.output = nullptr;
  run_on_host(h, op, stage);
}

// Stage 3: the leader's op.output to every rank of its host.
void broadcast_within_host(const HierAllReduce& h, const Op& op) {
  if (h.host_group == nullptr) return;
  Op stage = op;
  stage.kind = OpKind::broadcast;
  stage.root = 0;
  stage.algorithm = Algorithm::automatic;
  stage.reduce_op = ReduceOp::sum;
  stage.input = op.output;
  run_on_host(h, op, stage);
}

}  // namespace

void all_reduce_hierarchical(const HierAllReduce& h, const Op& op) {
  // A forced algorithm applies to stage 2; rejected on every rank before anything moves.
  choose_all_reduce(op, h.group_size);
  const ReductionPlan plan = plan_reduction(op.dtype, op.reduce_op, h.group_size);
  const Op work = work_op(h, plan, op);
  reduce_within_host(h, op, work);
  if (h.host_rank == 0) {
    if (h.leaders != nullptr) {
      Op in_place = work;
      in_place.input = work.output;
      h.leaders->all_reduce(op, in_place);
    }
    if (plan.divisor > 0) finish_average(work.output, work.count, work.dtype, plan.divisor);
    if (work.dtype != op.dtype)
      narrow_from_f32(op.output, static_cast<const float*>(work.output), op.count, op.dtype);
  }
  broadcast_within_host(h, op);
}

}  // namespace lockstep::hier
