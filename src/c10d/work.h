// [Work] The torch Work of one torch op: the lockstep ops it issued (one, or several for the
// coalesced forms and endCoalescing), the tensors it keeps alive until they finish, and what to
// do once all succeeded (write results back into the caller's tensors). wait(timeout),
// isCompleted(), isSuccess(), exception(), result() and getFuture() (DDP's reducer and comm hooks
// need it) behave as torch documents. The future completes on the thread that completes the last
// lockstep op (the group's progress thread, or the caller's for an op that ran inline), after any
// write-back; its then-callbacks run there too. A failure reaches Python as RuntimeError carrying
// lockstep's message unchanged: the first op's error, when several fail.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

#include "lockstep/comm/work.h"

namespace lockstep::c10d_backend {

using Tensors = std::vector<at::Tensor>;

// [Profiling] Each Work records its op for torch's profiler as "lockstep:<op>" (torch's names:
// all_reduce, all_gather_into_tensor, recvAnySource, ...), with the shapes of `inputs` (of
// `outputs` when there are none), as gloo's do.
struct WorkSpec {
  ::c10d::OpType type;
  Tensors outputs;                 // result() and the future's value
  Tensors inputs{};                // recorded for the profiler
  Tensors keep_alive{};            // buffers the ops use, freed once they are over
  std::function<void()> finish{};  // after every op succeeded, before completion
  int source_rank = -1;            // a recv's source; -1: none, or any source (then `any_source`)
  bool any_source = false;
};

// The torch Work that completes when every op of `ops` has. `ops` may be empty (completed at once).
c10::intrusive_ptr<::c10d::Work> work_for(WorkSpec spec, std::vector<WorkPtr> ops);
c10::intrusive_ptr<::c10d::Work> work_for(WorkSpec spec, const WorkPtr& op);

}  // namespace lockstep::c10d_backend
