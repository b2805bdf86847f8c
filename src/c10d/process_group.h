// ProcessGroupLockstep: lockstep as a torch.distributed backend. A torch 2.x c10d::Backend
// (registered for "cpu", and for "cuda" in builds with lockstep's nccl backend) whose every op
// runs on one lockstep ProcessGroup built on the store that torch hands the backend's creator
// function. [Tensors] (tensors.h) says what tensors it takes, [Work] (work.h) what its ops return.
// This folder is all the code that faces c10d.
//
// [Coalescing] startCoalescing()/endCoalescing() (torch's _coalescing_manager, and DDP's and
// FSDP's grouped ops): each op issued in between starts at once, in order, and returns its own
// Work; endCoalescing's Work completes when every one of them has, with the first error. The
// *_coalesced forms run as one lockstep op over a flat buffer.
//
// [Sparse] allreduce of a sparse COO tensor (DDP's sparse embedding gradients), as gloo does it:
// every rank's indices and values are gathered, and each rank sums them into one coalesced
// tensor, written into the input. Only SUM (and AVG) are defined for it.
//
// [Not supported] recvAnysource is supported (lockstep's recv_any); PREMUL_SUM and lists of
// several tensors where torch means one per device raise an error saying so.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "c10d/work.h"

namespace lockstep {
class ProcessGroup;
}

namespace lockstep::c10d_backend {

// [GIL] The group's progress thread completes ops and may free the last reference to a tensor
// that a Python object owns, which takes the GIL. A thread that holds the GIL must therefore not
// wait for that thread: the destructor (run by torch's destroy_process_group with the GIL held)
// runs its wait through this wrapper, which the Python module sets to release the GIL first.
using BlockingCallWrapper = void (*)(const std::function<void()>& call);
void set_blocking_call_wrapper(BlockingCallWrapper wrapper);

class ProcessGroupLockstep : public ::c10d::Backend {
 public:
  using Work = ::c10d::Work;
  template <class T>
  using Ptr = c10::intrusive_ptr<T>;

  // Collective over the group's members: connects to every one through `store`. group_id is
  // torch's name of the group ("0" for the default group); global_ranks its members' ranks in
  // the default group (empty: the default group itself). LOCKSTEP_TIMEOUT, when set, overrides
  // `timeout` (torch's: 30 min unless init_process_group got another).
  ProcessGroupLockstep(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& group_id,
                       const std::vector<int64_t>& global_ranks);
  // Leaves the group (shutdown), waiting for the queued ops first.
  ~ProcessGroupLockstep() override;
  // torch's destroy_process_group: waits for the queued ops, then leaves the group, so that a peer
  // still waiting in an op hears that this rank shut its group down, not that its process died.
  // Later ops get InvalidArgument. No `override`: torch 2.4's Backend may lack the virtual.
  void shutdown();

  const std::string getBackendName() const override { return "lockstep"; }
  // lockstep's backend in use: "shm", "tcp", "hier", ...
  const std::string& lockstep_backend() const;
  // [Coalescing]; batch_isend_irecv then coalesces too. No `override`: torch 2.4 has no such
  // virtual.
  bool supportsCoalescing() const { return true; }

  Ptr<Work> broadcast(Tensors& tensors, const ::c10d::BroadcastOptions& opts) override;
  Ptr<Work> allreduce(Tensors& tensors, const ::c10d::AllreduceOptions& opts) override;
  Ptr<Work> allreduce_sparse(Tensors& tensors, const ::c10d::AllreduceOptions& opts) override;
  Ptr<Work> allreduce_coalesced(Tensors& tensors,
                                const ::c10d::AllreduceCoalescedOptions& opts) override;
  Ptr<Work> reduce(Tensors& tensors, const ::c10d::ReduceOptions& opts) override;
  Ptr<Work> allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                      const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                            const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                                const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                            const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> gather(std::vector<Tensors>& outputs, Tensors& inputs,
                   const ::c10d::GatherOptions& opts) override;
  Ptr<Work> scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                    const ::c10d::ScatterOptions& opts) override;
  Ptr<Work> reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                           const ::c10d::ReduceScatterOptions& opts) override;
  Ptr<Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                 const ::c10d::ReduceScatterOptions& opts) override;
  Ptr<Work> reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                            const ::c10d::ReduceScatterOptions& opts) override;
  Ptr<Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                          std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                          const ::c10d::AllToAllOptions& opts) override;
  Ptr<Work> alltoall(Tensors& outputs, Tensors& inputs,
                     const ::c10d::AllToAllOptions& opts) override;
  Ptr<Work> barrier(const ::c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  Ptr<Work> send(Tensors& tensors, int dst, int tag) override;
  Ptr<Work> recv(Tensors& tensors, int src, int tag) override;
  Ptr<Work> recvAnysource(Tensors& tensors, int tag) override;
  void startCoalescing() override;
  Ptr<Work> endCoalescing() override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_; }

 private:
  // Every op's Work goes through here: counted (collectives), and joined while coalescing.
  Ptr<Work> issue(WorkSpec spec, std::vector<WorkPtr> ops, bool collective = true);
  Ptr<Work> sparse_allreduce(const at::Tensor& tensor, const ::c10d::AllreduceOptions& opts);
  // The lockstep group; InvalidArgument after shutdown().
  lockstep::ProcessGroup& group() const;

  std::string name_;                               // lockstep's name of the group
  std::shared_ptr<lockstep::ProcessGroup> group_;  // null after shutdown()
  uint64_t collectives_ = 0;  // collectives issued (the same on every rank when they agree)
  bool coalescing_ = false;
  std::vector<WorkPtr> coalesced_;  // the ops issued since startCoalescing()
};

}  // namespace lockstep::c10d_backend
