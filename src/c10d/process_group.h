// ProcessGroupLockstep: lockstep as a torch.distributed backend. A c10d::ProcessGroup (torch
// 1.13's API; in torch 2.x it would derive from c10d::Backend instead, and only this file and its
// .cc would change) whose every op runs on a lockstep ProcessGroup built on the store that torch
// hands the backend's creator function.
//
// [Tensors] Each op takes CPU tensors (any dtype lockstep has: f32, f64, f16, bf16, i8, u8, i32,
// i64; bool where lockstep allows it) or, in builds with the nccl backend, CUDA tensors. A
// contiguous tensor is communicated in place, with no copy. A non-contiguous one goes through a
// contiguous copy, written back when the op completes. Ops on lists of tensors (allgather,
// gather, scatter, reduce_scatter, alltoall, the coalesced forms) go through one flat buffer; the
// _base forms take the flat buffers directly.
//
// [Work] Every op returns a LockstepWork: wait(timeout), isCompleted(), isSuccess(), exception(),
// result() and getFuture() (DDP's reducer and comm hooks need it). The future completes on the
// thread that completes the lockstep op (the group's progress thread), after any write-back; its
// then-callbacks run there too. A failure reaches Python as RuntimeError carrying lockstep's
// message unchanged.
//
// [Not supported] recvAnysource (lockstep's p2p names its source), PREMUL_SUM, and lists of
// several tensors where torch means one per device: each raises an error saying so.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

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

class ProcessGroupLockstep : public ::c10d::ProcessGroup {
 public:
  using Work = ::c10d::Work;
  template <class T>
  using Ptr = c10::intrusive_ptr<T>;
  using Tensors = std::vector<at::Tensor>;

  // Collective over the group's members: connects to every one through `store`. group_id is
  // torch's name of the group ("0" for the default group); global_ranks its members' ranks in
  // the default group (empty: the default group itself). LOCKSTEP_TIMEOUT, when set, overrides
  // `timeout` (torch's: 30 min unless init_process_group got another).
  ProcessGroupLockstep(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& group_id,
                       const std::vector<int64_t>& global_ranks);
  ~ProcessGroupLockstep() override;

  const std::string getBackendName() const override { return "lockstep"; }
  // lockstep's backend in use: "shm", "tcp", "hier", ...
  const std::string& lockstep_backend() const;

  Ptr<Work> broadcast(Tensors& tensors, const ::c10d::BroadcastOptions& opts) override;
  Ptr<Work> allreduce(Tensors& tensors, const ::c10d::AllreduceOptions& opts) override;
  Ptr<Work> allreduce_coalesced(Tensors& tensors,
                                const ::c10d::AllreduceCoalescedOptions& opts) override;
  Ptr<Work> reduce(Tensors& tensors, const ::c10d::ReduceOptions& opts) override;
  Ptr<Work> allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                      const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                            const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                                const ::c10d::AllgatherOptions& opts) override;
  Ptr<Work> gather(std::vector<Tensors>& outputs, Tensors& inputs,
                   const ::c10d::GatherOptions& opts) override;
  Ptr<Work> scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                    const ::c10d::ScatterOptions& opts) override;
  Ptr<Work> reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                           const ::c10d::ReduceScatterOptions& opts) override;
  Ptr<Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
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
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_; }

 private:
  std::shared_ptr<lockstep::ProcessGroup> group_;
  uint64_t collectives_ = 0;  // collectives issued (the same on every rank when they agree)
};

}  // namespace lockstep::c10d_backend
