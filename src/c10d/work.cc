#include "c10d/work.h"

#include <ATen/core/ivalue.h>

#include <mutex>

#include "comm/failure.h"

namespace lockstep::c10d_backend {
namespace {

// [Profiling] torch's name of each op kind.
const char* profiling_title(::c10d::OpType type) {
  using ::c10d::OpType;
  switch (type) {
    case OpType::BROADCAST:
      return "lockstep:broadcast";
    case OpType::ALLREDUCE:
      return "lockstep:all_reduce";
    case OpType::ALLREDUCE_COALESCED:
      return "lockstep:all_reduce_coalesced";
    case OpType::REDUCE:
      return "lockstep:reduce";
    case OpType::ALLGATHER:
      return "lockstep:all_gather";
    case OpType::_ALLGATHER_BASE:
      return "lockstep:all_gather_into_tensor";
    case OpType::ALLGATHER_COALESCED:
      return "lockstep:all_gather";
    case OpType::GATHER:
      return "lockstep:gather";
    case OpType::SCATTER:
      return "lockstep:scatter";
    case OpType::REDUCE_SCATTER:
      return "lockstep:reduce_scatter";
    case OpType::_REDUCE_SCATTER_BASE:
      return "lockstep:reduce_scatter_tensor";
    case OpType::ALLTOALL_BASE:
    case OpType::ALLTOALL:
      return "lockstep:all_to_all";
    case OpType::SEND:
      return "lockstep:send";
    case OpType::RECV:
      return "lockstep:recv";
    case OpType::RECVANYSOURCE:
      return "lockstep:recvAnySource";
    case OpType::BARRIER:
      return "lockstep:barrier";
    default:
      return "lockstep:coalesced";
  }
}

// The future's value type, made once: List[Tensor].
const c10::TypePtr& tensor_list_type() {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

class LockstepWork : public ::c10d::Work {
 public:
  explicit LockstepWork(WorkSpec spec)
      : Work(-1, spec.type, profiling_title(spec.type),
             spec.inputs.empty() ? spec.outputs : spec.inputs),
        spec_(std::move(spec)),
        future_(c10::make_intrusive<at::ivalue::Future>(tensor_list_type())) {}

  std::vector<at::Tensor> result() override { return spec_.outputs; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override {
    TORCH_CHECK(spec_.source_rank >= 0 || spec_.any_source,
                "sourceRank() is only defined for a recv");
    TORCH_CHECK(spec_.source_rank >= 0,
                "sourceRank() of a recv from any source is known once "
                "it has completed: call wait() first");
    return spec_.source_rank;
  }
  void synchronize() override {}
  void abort() override {
    TORCH_CHECK(false,
                "lockstep: Work::abort() is not supported; every op ends by its deadline "
                "(LOCKSTEP_TIMEOUT or the group's timeout)");
  }

  // Keeps the lockstep ops' handles until they complete: a dropped handle would make the torch
  // call wait for its op ([Dropped handles] in lockstep/comm/work.h), and async_op=True, isend
  // and irecv would block.
  void hold(std::vector<WorkPtr> ops) {
    ops_ = std::move(ops);
    pending_ = ops_.size();
  }

  // Runs once per op, on the thread that completed it; the last one completes the torch Work.
  void one_done(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      if (error && !error_) error_ = error;
      if (--pending_ > 0) return;
    }
    done();
  }

  void done() {
    std::exception_ptr error = error_;
    if (spec_.any_source && !ops_.empty()) spec_.source_rank = ops_.front()->source_rank();
    if (!error && spec_.finish) {
      try {
        spec_.finish();
      } catch (...) {
        error = std::current_exception();
      }
    }
    spec_.keep_alive.clear();
    spec_.finish = nullptr;
    // lockstep's message, unchanged, as the RuntimeError Python sees.
    if (error) error = std::make_exception_ptr(std::runtime_error(what_of(error)));
    finish(error);  // ::c10d::Work: wakes wait(), sets isCompleted / exception
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(spec_.outputs));
    ops_.clear();  // the ops are over: dropping their handles no longer waits
  }

 private:
  WorkSpec spec_;
  std::vector<WorkPtr> ops_;
  std::mutex mutex_;
  size_t pending_ = 0;
  std::exception_ptr error_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
};

}  // namespace

c10::intrusive_ptr<::c10d::Work> work_for(WorkSpec spec, std::vector<WorkPtr> ops) {
  auto work = c10::make_intrusive<LockstepWork>(std::move(spec));
  work->hold(ops);
  if (ops.empty()) work->done();
  for (const auto& op : ops) op->on_complete([work](std::exception_ptr e) { work->one_done(e); });
  return work;
}

c10::intrusive_ptr<::c10d::Work> work_for(WorkSpec spec, const WorkPtr& op) {
  return work_for(std::move(spec), std::vector<WorkPtr>{op});
}

}  // namespace lockstep::c10d_backend
