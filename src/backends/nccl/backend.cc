// NcclBackend: runs each op as NCCL calls on the group's stream and waits for it with the async
// error handling of Communicator::wait. A failure on this rank aborts the communicator and leaves
// an abort note in the store, so that peers stop waiting at once with the cause.
#include "backends/nccl/backend.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <span>

#include "backends/nccl/collectives.h"
#include "backends/nccl/communicator.h"
#include "backends/nccl/cuda_util.h"
#include "backends/nccl/stream_order.h"
#include "comm/op_identity.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

class NcclBackend final : public BackendBase {
 public:
  NcclBackend(const GroupConfig& config, int device, Deadline deadline)
      : BackendBase("nccl", config), comm_(config, device, deadline) {}

  // On the caller's thread, so that a wrong buffer or reduce op leaves the group usable.
  void check(const Op& op) const override {
    check_pointers(op);
    nccl::check_reduce_op(op);
  }

  // [Stream order] (stream_order.h): the caller's current stream, marked at issue.
  void prepare(Op& op) override {
    if (op.device.is_cuda())
      op.issued_state = nccl::mark_issue(nccl::cuda_stream_api(), op.device.index,
                                         detail::concat(op.name(), " on rank ", rank()));
  }

  void run(const Op& op) override {
    guarded(op, [&] {
      ready_for(op);
      nccl::order_after_issue(nccl::cuda_stream_api(), op.issued_state, comm_.stream(), op.name());
      {
        nccl::ArmedWatch armed(comm_.blocking_watch(), op.deadline);  // [Blocking mode]
        nccl::enqueue_op(comm_, op, rank());
      }
      comm_.wait(op.name(), op.deadline);
    });
  }

  // ncclSend and ncclRecv progress only within one group ([Fused p2p] in
  // group/progress_queue.h).
  bool fuses_p2p(const Op& op) const override { return is_p2p(op.kind); }

  void run_p2p_group(std::span<const Op> ops) override {
    guarded(ops.front(), [&] {
      ready_for(ops.front());
      for (const Op& op : ops)
        nccl::order_after_issue(nccl::cuda_stream_api(), op.issued_state, comm_.stream(),
                                op.name());
      {
        nccl::ArmedWatch armed(comm_.blocking_watch(), ops.front().deadline);
        nccl::enqueue_p2p_group(comm_, ops);
      }
      comm_.wait(group_name(ops), ops.front().deadline);
    });
  }

  std::string device_problem(Device device) const override {
    if (device == Device::cuda(comm_.device())) return "";
    if (!device.is_cuda())
      return "backend 'nccl' moves CUDA device memory only (use backend 'auto' to mix host and "
             "device buffers)";
    return detail::concat("group '", config().name, "' uses nccl on cuda:", comm_.device(),
                          " (the device that was current at init); put the buffers there, or "
                          "call cudaSetDevice(local_rank) before init");
  }

  // Runs on the thread that destroys the group: its current device is restored afterwards.
  void shutdown(Deadline deadline) override {
    int callers_device = -1;
    cudaGetDevice(&callers_device);
    try {
      nccl::check_cuda(cudaSetDevice(comm_.device()), "shutdown: cudaSetDevice");
      comm_.finalize(deadline);
    } catch (const Error&) {
      // The communicator was aborted instead; peers see their own errors or finish.
    }
    if (callers_device >= 0) cudaSetDevice(callers_device);
  }

 private:
  // The note first (peers poll the store while they wait), then the communicator, which makes
  // the peers' NCCL calls fail.
  void tell_peers(ErrorClass /*error_class*/, const std::string& reason) override {
    write_note(reason);
    comm_.abort();
  }

  void ready_for(const Op& op) {
    // The communicator aborts itself when it sees a peer's abort note or an NCCL error.
    LOCKSTEP_ENFORCE(!comm_.aborted(), NetworkError, op.name(),
                     ": the group's NCCL communicator was aborted");
    // The progress thread is not the thread that set the device at init.
    nccl::check_cuda(cudaSetDevice(comm_.device()), op.name() + ": cudaSetDevice");
  }

  // "send #3 to rank 1 and 2 more sends and recvs", for errors.
  static std::string group_name(std::span<const Op> ops) {
    if (ops.size() == 1) return ops.front().name();
    return detail::concat(ops.front().name(), " and ", ops.size() - 1,
                          " more sends and recvs in its ncclGroupStart/End");
  }

  // A buffer tagged Device::cuda(n) must really be device memory on cuda:n; NCCL would otherwise
  // fault or read the wrong memory.
  void check_pointers(const Op& op) const {
    const std::string expected = "cuda:" + std::to_string(comm_.device());
    for (const void* p :
         {static_cast<const void*>(op.input), static_cast<const void*>(op.output)}) {
      if (p == nullptr) continue;
      std::string actual = nccl::memory_location(p);
      LOCKSTEP_ENFORCE(actual == expected, InvalidArgument, op.name(), " on rank ", rank(),
                       ": a buffer tagged ", expected, " points to ", actual,
                       " memory; tag each BufferView with the device its memory is on");
    }
  }

  nccl::Communicator comm_;
};

// The device the calling thread has current, after checking that there is a GPU at all.
int current_device(const GroupConfig& config) {
  std::string why;
  LOCKSTEP_ENFORCE(nccl::visible_gpu_count(&why) > 0, ConfigError, "group '", config.name,
                   "': backend nccl needs a CUDA device, but rank ", config.rank, " sees none (",
                   why, "); use backend auto, shm or tcp on hosts without GPUs");
  int device = 0;
  nccl::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

class DeviceRouter final : public Backend {
 public:
  DeviceRouter(std::unique_ptr<Backend> host, const GroupConfig& config)
      : host_(std::move(host)), config_(config) {}

  const std::string& name() const override { return host_->name(); }

  // Before the first CUDA op the nccl backend does not exist yet: run() checks that one then.
  void check(const Op& op) const override {
    if (!op.device.is_cuda()) return host_->check(op);
    if (auto* nccl = nccl_ready_.load()) nccl->check(op);
  }

  void run(const Op& op) override {
    if (!op.device.is_cuda()) return host_->run(op);
    nccl_for(op).run(op);
  }

  // The nccl backend's stream order; host ops capture nothing.
  void prepare(Op& op) override {
    if (!op.device.is_cuda()) return host_->prepare(op);
    op.issued_state = nccl::mark_issue(nccl::cuda_stream_api(), op.device.index,
                                       detail::concat(op.name(), " on rank ", config_.rank));
  }

  // Host sends and recvs never reach the queue here (the group's p2p engine moves them).
  bool fuses_p2p(const Op& op) const override {
    return op.device.is_cuda() && (op.kind == OpKind::send || op.kind == OpKind::recv);
  }

  void run_p2p_group(std::span<const Op> ops) override { nccl_for(ops.front()).run_p2p_group(ops); }

  bool prefers_inline(const Op& op) const override {
    return !op.device.is_cuda() && host_->prefers_inline(op);
  }

  SharedBuffer allocate(size_t bytes, uint64_t index, Deadline deadline) override {
    return host_->allocate(bytes, index, deadline);
  }

  std::vector<int> unreachable_ranks() const override { return host_->unreachable_ranks(); }
  std::shared_ptr<PeerLinks> peer_links() const override { return host_->peer_links(); }

  std::string device_problem(Device device) const override {
    if (!device.is_cuda()) return host_->device_problem(device);
    int bound = nccl_device_.load();
    if (bound >= 0 && device.index != bound)
      return detail::concat("group '", config_.name, "' already runs nccl on cuda:", bound,
                            "; one group uses one device per rank");
    // Asked once, on first use: CPU-only jobs never initialise CUDA.
    std::call_once(gpus_once_, [&] { gpus_ = nccl::visible_gpu_count(&no_gpu_reason_); });
    if (gpus_ == 0) return "this process sees no CUDA device (" + no_gpu_reason_ + ")";
    if (device.index < 0 || device.index >= gpus_)
      return detail::concat("this process sees only ", gpus_, " CUDA device(s)");
    return "";
  }

  void abort(const std::string& reason) override {
    host_->abort(reason);
    if (nccl_) nccl_->abort(reason);
  }

  void shutdown(Deadline deadline) override {
    if (nccl_) nccl_->shutdown(deadline);
    host_->shutdown(deadline);
  }

 private:
  // The nccl backend, made by the first CUDA op. A failed init is not retried: its error is
  // raised again (the queue breaks the group anyway; this keeps a direct caller from retrying
  // against the first attempt's store keys).
  NcclBackend& nccl_for(const Op& op) {
    if (init_failure_) std::rethrow_exception(init_failure_);
    if (!nccl_) {
      try {
        nccl_ = std::make_unique<NcclBackend>(config_, op.device.index, op.deadline);
      } catch (...) {
        init_failure_ = std::current_exception();
        throw;
      }
      nccl_device_.store(op.device.index);
      nccl_ready_.store(nccl_.get());
      nccl_->check(op);
    }
    return *nccl_;
  }

  std::unique_ptr<Backend> host_;
  GroupConfig config_;
  std::exception_ptr init_failure_;                // progress thread only
  std::unique_ptr<NcclBackend> nccl_;              // progress thread only
  std::atomic<int> nccl_device_{-1};               // read by device_problem on the caller's thread
  std::atomic<NcclBackend*> nccl_ready_{nullptr};  // nccl_, for check() on the caller's thread
  mutable std::once_flag gpus_once_;
  mutable int gpus_ = 0;
  mutable std::string no_gpu_reason_;
};

}  // namespace

extern "C" void lockstep_link_nccl_backend() {}

std::unique_ptr<Backend> make_nccl_backend(const GroupConfig& config) {
  return std::make_unique<NcclBackend>(config, current_device(config),
                                       Deadline::after(config.timeout));
}

std::unique_ptr<Backend> route_device_buffers_to_nccl(std::unique_ptr<Backend> host,
                                                      const GroupConfig& config) {
  return std::make_unique<DeviceRouter>(std::move(host), config);
}

}  // namespace lockstep
