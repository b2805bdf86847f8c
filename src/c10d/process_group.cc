#include "c10d/process_group.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <cstdlib>
#include <functional>
#include <numeric>

#include "c10d/store_adapter.h"
#include "comm/failure.h"
#include "comm/group_config.h"
#include "core/log.h"
#include "group/rendezvous_env.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "lockstep/group/init.h"
#include "lockstep/group/process_group.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "torch/tensor_views.h"

namespace lockstep::c10d_backend {
namespace {

using Tensors = std::vector<at::Tensor>;
using lockstep::torch::detail::to_dtype;

// [Work] One torch op: the lockstep op it issued, the tensors it keeps alive until that op
// finishes, and what to do once it succeeded (write results back into the caller's tensors).
class LockstepWork : public ::c10d::Work {
 public:
  LockstepWork(::c10d::OpType type, Tensors outputs, int source_rank, Tensors keep_alive,
               std::function<void()> finish)
      : Work(-1, type),
        outputs_(std::move(outputs)),
        source_rank_(source_rank),
        keep_alive_(std::move(keep_alive)),
        finish_(std::move(finish)),
        future_(c10::make_intrusive<at::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override {
    TORCH_CHECK(source_rank_ >= 0 || any_source_, "sourceRank() is only defined for a recv");
    TORCH_CHECK(source_rank_ >= 0, "sourceRank() of a recv from any source is known once it "
                                   "has completed: call wait() first");
    return source_rank_;
  }

  // Keeps the lockstep op's handle until the op completes: a dropped handle would make the torch
  // call wait for the op ([Dropped handles] in lockstep/comm/work.h), and async_op=True, isend
  // and irecv would block. `any_source`: sourceRank() is the op's, once it completed.
  void hold(WorkPtr op, bool any_source) {
    op_ = std::move(op);
    any_source_ = any_source;
  }
  void synchronize() override {}
  void abort() override {
    TORCH_CHECK(false,
                "lockstep: Work::abort() is not supported; every op ends by its deadline "
                "(LOCKSTEP_TIMEOUT or the group's timeout)");
  }

  // Runs once, on the thread that completed the lockstep op.
  void done(std::exception_ptr error) {
    if (any_source_ && op_) source_rank_ = op_->source_rank();
    if (!error && finish_) {
      try {
        finish_();
      } catch (...) {
        error = std::current_exception();
      }
    }
    keep_alive_.clear();
    finish_ = nullptr;
    if (error) error = as_runtime_error(error);
    finish(error);  // ::c10d::Work: wakes wait(), sets isCompleted / exception
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
    op_.reset();  // the op is over: dropping its handle no longer waits
  }

 private:
  // lockstep's message, unchanged, as the RuntimeError Python sees.
  static std::exception_ptr as_runtime_error(const std::exception_ptr& error) {
    return std::make_exception_ptr(std::runtime_error(what_of(error)));
  }

  Tensors outputs_;
  int source_rank_;
  WorkPtr op_;
  bool any_source_ = false;
  Tensors keep_alive_;
  std::function<void()> finish_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
};

// The torch Work of one lockstep op: completes (running `finish` first) when `op` does.
c10::intrusive_ptr<::c10d::Work> work_for(::c10d::OpType type, Tensors outputs, const WorkPtr& op,
                                          Tensors keep_alive, std::function<void()> finish = {},
                                          int source_rank = -1, bool any_source = false) {
  auto work = c10::make_intrusive<LockstepWork>(type, std::move(outputs), source_rank,
                                                std::move(keep_alive), std::move(finish));
  work->hold(op, any_source);
  op->on_complete([work](std::exception_ptr e) { work->done(e); });
  return work;
}

// The dtype and device checks every tensor passes before lockstep sees it.
Device device_of(const at::Tensor& t, const char* op) {
  if (t.device().is_cpu()) return Device{};
  if (t.device().is_cuda()) return Device::cuda(t.device().index());
  throw InvalidArgument(detail::concat("lockstep ", op, ": tensors on ", t.device().str(),
                                       " are not supported (CPU, or CUDA with the nccl backend)"));
}

BufferView view_of(const at::Tensor& contiguous, const char* op) {
  auto dtype = to_dtype(contiguous.scalar_type());
  if (!dtype)
    throw InvalidArgument(detail::concat("lockstep ", op, ": dtype ", contiguous.scalar_type(),
                                         " is not supported (float32, float64, float16, "
                                         "bfloat16, int8, uint8, int32, int64, bool)"));
  return BufferView{contiguous.data_ptr(), static_cast<size_t>(contiguous.numel()), *dtype,
                    device_of(contiguous, op)};
}

// [Tensors] A tensor as one contiguous buffer: itself, or a copy written back by write_back().
struct Staged {
  at::Tensor original, buffer;
  bool copied() const { return !buffer.is_same(original); }
  void write_back() const {
    if (copied()) original.copy_(buffer);
  }
};

Staged stage(const at::Tensor& t) {
  return Staged{t, t.is_contiguous() ? t : t.contiguous()};
}

const at::Tensor& single(const Tensors& tensors, const char* op) {
  if (tensors.size() != 1)
    throw InvalidArgument(detail::concat(
        "lockstep ", op, ": takes exactly one tensor, got ", tensors.size(),
        " (lists of one tensor per device are not supported: use one process per device)"));
  return tensors.front();
}

// One flat tensor holding the given tensors one after another.
at::Tensor flat_copy(const Tensors& tensors) {
  Tensors flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive slices of flat into each tensor.
void unflatten_into(const at::Tensor& flat, const Tensors& tensors) {
  int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, at, t.numel()).view_as(t));
    at += t.numel();
  }
}

void require_same(const Tensors& tensors, const at::Tensor& like, const char* op,
                  const char* what) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].numel() != like.numel() || tensors[i].scalar_type() != like.scalar_type())
      throw InvalidArgument(
          detail::concat("lockstep ", op, ": ", what, "[", i, "] has ", tensors[i].numel(),
                         " elements of ", tensors[i].scalar_type(), ", but the input has ",
                         like.numel(), " of ", like.scalar_type(), "; each must match the input"));
}

void require_count(const Tensors& tensors, size_t count, const char* op, const char* what) {
  if (tensors.size() != count)
    throw InvalidArgument(detail::concat("lockstep ", op, ": ", what, " has ", tensors.size(),
                                         " tensors; it needs one per rank (", count, ")"));
}

ReduceOp reduce_op(const ::c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      return ReduceOp::sum;
    case ::c10d::ReduceOp::AVG:
      return ReduceOp::avg;
    case ::c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case ::c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case ::c10d::ReduceOp::MAX:
      return ReduceOp::max;
    case ::c10d::ReduceOp::BAND:
      return ReduceOp::band;
    case ::c10d::ReduceOp::BOR:
      return ReduceOp::bor;
    case ::c10d::ReduceOp::BXOR:
      return ReduceOp::bxor;
    default:
      throw InvalidArgument(detail::concat(
          "lockstep ", name, ": reduce op ", static_cast<int>(op.op_),
          " (PREMUL_SUM) is not supported yet; multiply the tensor first, then use SUM"));
  }
}

std::chrono::milliseconds timeout_of(std::chrono::milliseconds t) {
  return t == ::c10d::kUnsetTimeout ? kGroupTimeout : t;
}

std::vector<size_t> counts_of(const std::vector<int64_t>& splits, int64_t row, int size,
                              int64_t rows, const char* which) {
  std::vector<size_t> counts;
  if (splits.empty()) {
    if (rows % size != 0)
      throw InvalidArgument(detail::concat("lockstep alltoall_base: ", rows, " rows of the ", which,
                                           " do not split evenly over ", size,
                                           " ranks; give split sizes"));
    counts.assign(static_cast<size_t>(size), static_cast<size_t>(rows / size * row));
    return counts;
  }
  if (static_cast<int>(splits.size()) != size)
    throw InvalidArgument(detail::concat("lockstep alltoall_base: ", splits.size(), " ", which,
                                         " split sizes for ", size, " ranks"));
  for (int64_t s : splits) {
    if (s < 0) throw InvalidArgument("lockstep alltoall_base: negative split size");
    counts.push_back(static_cast<size_t>(s * row));
  }
  return counts;
}

// Where peers reach this process: LOCKSTEP_SOCKET_ADDR, else this host's address toward
// MASTER_ADDR (the route torch's own store connection takes), else the host name.
std::string advertise_address() {
  if (!settings().socket_addr.empty()) return settings().socket_addr;
  if (const char* master = std::getenv("MASTER_ADDR"); master && *master) {
    try {
      return net::address_toward(master);
    } catch (const std::exception&) {
      // Fall through to the host name.
    }
  }
  return net::hostname();
}

BlockingCallWrapper g_blocking_call = nullptr;

}  // namespace

void set_blocking_call_wrapper(BlockingCallWrapper wrapper) {
  g_blocking_call = wrapper;
}

ProcessGroupLockstep::ProcessGroupLockstep(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                           int size, std::chrono::milliseconds timeout,
                                           const std::string& group_id,
                                           const std::vector<int64_t>& global_ranks)
    : ::c10d::ProcessGroup(rank, size) {
  if (std::getenv("LOCKSTEP_TIMEOUT")) timeout = settings().timeout;
  GroupConfig config{.name = global_ranks.empty() ? "default" : "torch" + group_id,
                     .rank = rank,
                     .size = size,
                     .store = std::make_shared<C10dStore>(store, timeout),
                     .timeout = timeout,
                     .advertise_address = advertise_address(),
                     .hostname = net::hostname(),
                     .local_world_size = local_world_size_from(process_env()),
                     .secret = job_secret_from_environment()};
  for (int64_t r : global_ranks) config.global_ranks.push_back(static_cast<int>(r));
  try {
    // Under `lockstep run`, blame keys go where the launcher reads them.
    config.report_store = open_launcher_store(std::chrono::seconds(10));
  } catch (const std::exception& e) {
    log_info("the launcher's store cannot be reached (", e.what(),
             "); its summary will name the first rank to fail");
  }
  if (global_ranks.empty()) set_log_rank(rank);
  group_ = std::make_shared<lockstep::ProcessGroup>(std::move(config));
  init();
}

ProcessGroupLockstep::~ProcessGroupLockstep() {
  // Waits for the queued ops, which may need the GIL to finish ([GIL]).
  auto close = [this] { group_.reset(); };
  if (g_blocking_call)
    g_blocking_call(close);
  else
    close();
}

const std::string& ProcessGroupLockstep::lockstep_backend() const {
  return group_->backend_name();
}

auto ProcessGroupLockstep::broadcast(Tensors& tensors, const ::c10d::BroadcastOptions& opts)
    -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "broadcast");
  Staged s = stage(t);
  ++collectives_;
  auto op = group_->broadcast(
      view_of(s.buffer, "broadcast"),
      {.root = static_cast<int>(opts.rootRank), .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::BROADCAST, tensors, op, {s.buffer}, [s] { s.write_back(); });
}

auto ProcessGroupLockstep::allreduce(Tensors& tensors, const ::c10d::AllreduceOptions& opts)
    -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "allreduce");
  Staged s = stage(t);
  ReduceOp op_kind = reduce_op(opts.reduceOp, "allreduce");
  ++collectives_;
  auto op = group_->all_reduce(view_of(s.buffer, "allreduce"),
                               {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::ALLREDUCE, tensors, op, {s.buffer}, [s] { s.write_back(); });
}

auto ProcessGroupLockstep::allreduce_coalesced(Tensors& tensors,
                                               const ::c10d::AllreduceCoalescedOptions& opts)
    -> Ptr<Work> {
  if (tensors.empty()) throw InvalidArgument("lockstep allreduce_coalesced: no tensors");
  for (const auto& t : tensors)
    if (t.scalar_type() != tensors[0].scalar_type() || t.device() != tensors[0].device())
      throw InvalidArgument(detail::concat(
          "lockstep allreduce_coalesced: every tensor must have one dtype and device (got ",
          tensors[0].scalar_type(), " and ", t.scalar_type(), ")"));
  at::Tensor flat = flat_copy(tensors);
  ReduceOp op_kind = reduce_op(opts.reduceOp, "allreduce_coalesced");
  ++collectives_;
  auto op = group_->all_reduce(view_of(flat, "allreduce_coalesced"),
                               {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::ALLREDUCE_COALESCED, tensors, op, {flat},
                  [flat, tensors] { unflatten_into(flat, tensors); });
}

auto ProcessGroupLockstep::reduce(Tensors& tensors, const ::c10d::ReduceOptions& opts)
    -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "reduce");
  Staged s = stage(t);
  ReduceOp op_kind = reduce_op(opts.reduceOp, "reduce");
  BufferView v = view_of(s.buffer, "reduce");
  ++collectives_;
  auto op = group_->reduce(v, v,
                           {.root = static_cast<int>(opts.rootRank),
                            .op = op_kind,
                            .timeout = timeout_of(opts.timeout)});
  bool root = opts.rootRank == rank_;
  return work_for(::c10d::OpType::REDUCE, tensors, op, {s.buffer}, [s, root] {
    if (root) s.write_back();
  });
}

auto ProcessGroupLockstep::allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                                     const ::c10d::AllgatherOptions& opts) -> Ptr<Work> {
  const at::Tensor& in = single(inputs, "allgather");
  if (outputs.size() != 1)
    throw InvalidArgument("lockstep allgather: takes one output list (one tensor per rank)");
  Tensors& outs = outputs[0];
  require_count(outs, static_cast<size_t>(size_), "allgather", "the output list");
  require_same(outs, in, "allgather", "output");
  Staged s = stage(in);
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  ++collectives_;
  auto op = group_->all_gather(view_of(s.buffer, "allgather"), view_of(flat, "allgather"),
                               {.timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::ALLGATHER, outs, op, {s.buffer, flat},
                  [flat, outs] { unflatten_into(flat, outs); });
}

auto ProcessGroupLockstep::_allgather_base(at::Tensor& output, at::Tensor& input,
                                           const ::c10d::AllgatherOptions& opts) -> Ptr<Work> {
  Staged in = stage(input), out = stage(output);
  ++collectives_;
  auto op = group_->all_gather(view_of(in.buffer, "_allgather_base"),
                               view_of(out.buffer, "_allgather_base"),
                               {.timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::_ALLGATHER_BASE, {output}, op, {in.buffer, out.buffer},
                  [out] { out.write_back(); });
}

auto ProcessGroupLockstep::allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                                               const ::c10d::AllgatherOptions& opts) -> Ptr<Work> {
  if (inputs.empty()) throw InvalidArgument("lockstep allgather_coalesced: no input tensors");
  if (static_cast<int>(outputs.size()) != size_)
    throw InvalidArgument(detail::concat("lockstep allgather_coalesced: ", outputs.size(),
                                         " output lists for ", size_, " ranks"));
  Tensors all_outputs;
  for (auto& list : outputs) {
    require_count(list, inputs.size(), "allgather_coalesced", "an output list");
    for (size_t i = 0; i < list.size(); ++i)
      require_same({list[i]}, inputs[i], "allgather_coalesced", "output");
    all_outputs.insert(all_outputs.end(), list.begin(), list.end());
  }
  at::Tensor flat_in = flat_copy(inputs);
  at::Tensor flat_out = at::empty({size_ * flat_in.numel()}, flat_in.options());
  ++collectives_;
  auto op = group_->all_gather(view_of(flat_in, "allgather_coalesced"),
                               view_of(flat_out, "allgather_coalesced"),
                               {.timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::ALLGATHER_COALESCED, all_outputs, op, {flat_in, flat_out},
                  [flat_out, all_outputs] { unflatten_into(flat_out, all_outputs); });
}

auto ProcessGroupLockstep::gather(std::vector<Tensors>& outputs, Tensors& inputs,
                                  const ::c10d::GatherOptions& opts) -> Ptr<Work> {
  const at::Tensor& in = single(inputs, "gather");
  bool root = opts.rootRank == rank_;
  Tensors outs;
  if (root) {
    if (outputs.size() != 1)
      throw InvalidArgument("lockstep gather: the root takes one output list (one per rank)");
    outs = outputs[0];
    require_count(outs, static_cast<size_t>(size_), "gather", "the root's output list");
    require_same(outs, in, "gather", "output");
  } else if (!outputs.empty() && !outputs[0].empty()) {
    throw InvalidArgument("lockstep gather: only the root passes output tensors");
  }
  Staged s = stage(in);
  BufferView in_view = view_of(s.buffer, "gather");
  at::Tensor flat = at::empty({root ? size_ * in.numel() : 0}, in.options());
  BufferView out_view =
      root ? view_of(flat, "gather") : BufferView{nullptr, 0, in_view.dtype, in_view.device};
  ++collectives_;
  auto op = group_->gather(
      in_view, out_view,
      {.root = static_cast<int>(opts.rootRank), .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::GATHER, outs, op, {s.buffer, flat}, [flat, outs, root] {
    if (root) unflatten_into(flat, outs);
  });
}

auto ProcessGroupLockstep::scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                   const ::c10d::ScatterOptions& opts) -> Ptr<Work> {
  const at::Tensor& out = single(outputs, "scatter");
  bool root = opts.rootRank == rank_;
  at::Tensor flat = at::empty({0}, out.options());
  if (root) {
    if (inputs.size() != 1)
      throw InvalidArgument("lockstep scatter: the root takes one input list (one per rank)");
    require_count(inputs[0], static_cast<size_t>(size_), "scatter", "the root's input list");
    require_same(inputs[0], out, "scatter", "input");
    flat = flat_copy(inputs[0]);
  } else if (!inputs.empty() && !inputs[0].empty()) {
    throw InvalidArgument("lockstep scatter: only the root passes input tensors");
  }
  Staged s = stage(out);
  BufferView in_view = view_of(flat, "scatter");
  ++collectives_;
  auto op = group_->scatter(
      in_view, view_of(s.buffer, "scatter"),
      {.root = static_cast<int>(opts.rootRank), .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::SCATTER, outputs, op, {flat, s.buffer}, [s] { s.write_back(); });
}

auto ProcessGroupLockstep::reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                          const ::c10d::ReduceScatterOptions& opts) -> Ptr<Work> {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  if (inputs.size() != 1)
    throw InvalidArgument("lockstep reduce_scatter: takes one input list (one tensor per rank)");
  require_count(inputs[0], static_cast<size_t>(size_), "reduce_scatter", "the input list");
  require_same(inputs[0], out, "reduce_scatter", "input");
  ReduceOp op_kind = reduce_op(opts.reduceOp, "reduce_scatter");
  at::Tensor flat = flat_copy(inputs[0]);
  Staged s = stage(out);
  ++collectives_;
  auto op =
      group_->reduce_scatter(view_of(flat, "reduce_scatter"), view_of(s.buffer, "reduce_scatter"),
                             {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::REDUCE_SCATTER, outputs, op, {flat, s.buffer},
                  [s] { s.write_back(); });
}

auto ProcessGroupLockstep::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const ::c10d::ReduceScatterOptions& opts)
    -> Ptr<Work> {
  ReduceOp op_kind = reduce_op(opts.reduceOp, "_reduce_scatter_base");
  Staged in = stage(input), out = stage(output);
  ++collectives_;
  auto op = group_->reduce_scatter(view_of(in.buffer, "_reduce_scatter_base"),
                                   view_of(out.buffer, "_reduce_scatter_base"),
                                   {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::_REDUCE_SCATTER_BASE, {output}, op, {in.buffer, out.buffer},
                  [out] { out.write_back(); });
}

auto ProcessGroupLockstep::alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& output_splits,
                                         std::vector<int64_t>& input_splits,
                                         const ::c10d::AllToAllOptions& opts) -> Ptr<Work> {
  Staged in = stage(input), out = stage(output);
  auto row = [](const at::Tensor& t) {
    return t.dim() == 0 ? int64_t{1} : t.numel() / std::max<int64_t>(t.size(0), 1);
  };
  int64_t in_rows = input.dim() == 0 ? 1 : input.size(0);
  int64_t out_rows = output.dim() == 0 ? 1 : output.size(0);
  std::vector<size_t> send = counts_of(input_splits, row(input), size_, in_rows, "input");
  std::vector<size_t> recv = counts_of(output_splits, row(output), size_, out_rows, "output");
  ++collectives_;
  auto op = group_->all_to_all_v(view_of(in.buffer, "alltoall_base"), send,
                                 view_of(out.buffer, "alltoall_base"), recv,
                                 {.timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::ALLTOALL_BASE, {output}, op, {in.buffer, out.buffer},
                  [out] { out.write_back(); });
}

auto ProcessGroupLockstep::alltoall(Tensors& outputs, Tensors& inputs,
                                    const ::c10d::AllToAllOptions& opts) -> Ptr<Work> {
  require_count(inputs, static_cast<size_t>(size_), "alltoall", "the input list");
  require_count(outputs, static_cast<size_t>(size_), "alltoall", "the output list");
  std::vector<size_t> send, recv;
  for (const auto& t : inputs) send.push_back(static_cast<size_t>(t.numel()));
  for (const auto& t : outputs) recv.push_back(static_cast<size_t>(t.numel()));
  at::Tensor flat_in = flat_copy(inputs);
  at::Tensor flat_out =
      at::empty({std::accumulate(recv.begin(), recv.end(), int64_t{0})}, flat_in.options());
  ++collectives_;
  auto op = group_->all_to_all_v(view_of(flat_in, "alltoall"), send, view_of(flat_out, "alltoall"),
                                 recv, {.timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::ALLTOALL, outputs, op, {flat_in, flat_out},
                  [flat_out, outputs] { unflatten_into(flat_out, outputs); });
}

auto ProcessGroupLockstep::barrier(const ::c10d::BarrierOptions& opts) -> Ptr<Work> {
  ++collectives_;
  auto op = group_->barrier({.timeout = timeout_of(opts.timeout)});
  return work_for(::c10d::OpType::BARRIER, {}, op, {});
}

void ProcessGroupLockstep::monitoredBarrier(const ::c10d::BarrierOptions& opts, bool) {
  // lockstep's monitored barrier always names every rank that did not arrive.
  group_->monitored_barrier(timeout_of(opts.timeout));
}

auto ProcessGroupLockstep::send(Tensors& tensors, int dst, int tag) -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "send");
  Staged s = stage(t);
  auto op = group_->send(view_of(s.buffer, "send"), dst, {.tag = static_cast<uint32_t>(tag)});
  return work_for(::c10d::OpType::SEND, tensors, op, {s.buffer});
}

auto ProcessGroupLockstep::recv(Tensors& tensors, int src, int tag) -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "recv");
  Staged s = stage(t);
  auto op = group_->recv(view_of(s.buffer, "recv"), src, {.tag = static_cast<uint32_t>(tag)});
  return work_for(
      ::c10d::OpType::RECV, tensors, op, {s.buffer}, [s] { s.write_back(); }, src);
}

auto ProcessGroupLockstep::recvAnysource(Tensors& tensors, int tag) -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "recv");
  Staged s = stage(t);
  auto op = group_->recv_any(view_of(s.buffer, "recv"), {.tag = static_cast<uint32_t>(tag)});
  return work_for(
      ::c10d::OpType::RECVANYSOURCE, tensors, op, {s.buffer}, [s] { s.write_back(); }, -1,
      true);
}

}  // namespace lockstep::c10d_backend
