#include "c10d/process_group.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <functional>
#include <numeric>

#include "c10d/store_adapter.h"
#include "c10d/tensors.h"
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

namespace lockstep::c10d_backend {
namespace {

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
    : ::c10d::Backend(rank, size) {
  if (live_setting(LiveSetting::timeout)) timeout = settings().timeout;
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
  name_ = config.name;
  group_ = std::make_shared<lockstep::ProcessGroup>(std::move(config));
}

ProcessGroupLockstep::~ProcessGroupLockstep() {
  shutdown();
}

void ProcessGroupLockstep::shutdown() {
  // Waits for the queued ops, which may need the GIL to finish ([GIL]).
  auto close = [this] { group_.reset(); };
  if (g_blocking_call)
    g_blocking_call(close);
  else
    close();
}

lockstep::ProcessGroup& ProcessGroupLockstep::group() const {
  if (!group_)
    throw InvalidArgument(detail::concat("lockstep: process group '", name_,
                                         "' was shut down (destroy_process_group); create a new "
                                         "group for more ops"));
  return *group_;
}

const std::string& ProcessGroupLockstep::lockstep_backend() const {
  return group().backend_name();
}

auto ProcessGroupLockstep::broadcast(Tensors& tensors, const ::c10d::BroadcastOptions& opts)
    -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "broadcast");
  Staged s = stage(t);
  auto op = group().broadcast(
      view_of(s.buffer, "broadcast"),
      {.root = static_cast<int>(opts.rootRank), .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::BROADCAST,
                .outputs = tensors,
                .keep_alive = {s.buffer},
                .finish = [s] { s.write_back(); }},
               {op});
}

auto ProcessGroupLockstep::allreduce(Tensors& tensors, const ::c10d::AllreduceOptions& opts)
    -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "allreduce");
  if (t.is_sparse()) return sparse_allreduce(t, opts);
  Staged s = stage(t);
  ReduceOp op_kind = reduce_op(opts.reduceOp, "allreduce");
  auto op = group().all_reduce(view_of(s.buffer, "allreduce"),
                               {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::ALLREDUCE,
                .outputs = tensors,
                .keep_alive = {s.buffer},
                .finish = [s] { s.write_back(); }},
               {op});
}

auto ProcessGroupLockstep::allreduce_coalesced(Tensors& tensors,
                                               const ::c10d::AllreduceCoalescedOptions& opts)
    -> Ptr<Work> {
  require_one_kind(tensors, "allreduce_coalesced");
  at::Tensor flat = flat_copy(tensors);
  ReduceOp op_kind = reduce_op(opts.reduceOp, "allreduce_coalesced");
  auto op = group().all_reduce(view_of(flat, "allreduce_coalesced"),
                               {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::ALLREDUCE_COALESCED,
                .outputs = tensors,
                .keep_alive = {flat},
                .finish = [flat, tensors] { unflatten_into(flat, tensors); }},
               {op});
}

auto ProcessGroupLockstep::allreduce_sparse(Tensors& tensors, const ::c10d::AllreduceOptions& opts)
    -> Ptr<Work> {
  return sparse_allreduce(single(tensors, "allreduce_sparse"), opts);
}

auto ProcessGroupLockstep::reduce(Tensors& tensors, const ::c10d::ReduceOptions& opts)
    -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "reduce");
  Staged s = stage(t);
  ReduceOp op_kind = reduce_op(opts.reduceOp, "reduce");
  BufferView v = view_of(s.buffer, "reduce");
  auto op = group().reduce(v, v,
                           {.root = static_cast<int>(opts.rootRank),
                            .op = op_kind,
                            .timeout = timeout_of(opts.timeout)});
  bool root = opts.rootRank == rank_;
  return issue({.type = ::c10d::OpType::REDUCE,
                .outputs = tensors,
                .keep_alive = {s.buffer},
                .finish =
                    [s, root] {
                      if (root) s.write_back();
                    }},
               {op});
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
  auto op = group().all_gather(view_of(s.buffer, "allgather"), view_of(flat, "allgather"),
                               {.timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::ALLGATHER,
                .outputs = outs,
                .inputs = inputs,
                .keep_alive = {s.buffer, flat},
                .finish = [flat, outs] { unflatten_into(flat, outs); }},
               {op});
}

auto ProcessGroupLockstep::_allgather_base(at::Tensor& output, at::Tensor& input,
                                           const ::c10d::AllgatherOptions& opts) -> Ptr<Work> {
  Staged in = stage(input), out = stage(output);
  auto op = group().all_gather(view_of(in.buffer, "_allgather_base"),
                               view_of(out.buffer, "_allgather_base"),
                               {.timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::_ALLGATHER_BASE,
                .outputs = {output},
                .inputs = {input},
                .keep_alive = {in.buffer, out.buffer},
                .finish = [out] { out.write_back(); }},
               {op});
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
  auto op = group().all_gather(view_of(flat_in, "allgather_coalesced"),
                               view_of(flat_out, "allgather_coalesced"),
                               {.timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::ALLGATHER_COALESCED,
                .outputs = all_outputs,
                .inputs = inputs,
                .keep_alive = {flat_in, flat_out},
                .finish = [flat_out, all_outputs] { unflatten_into(flat_out, all_outputs); }},
               {op});
}

// outputs[i] = every rank's inputs[i], in rank order: one all_gather of the inputs laid end to
// end, after which rank r's copy of input i sits at r * total + offset(i).
auto ProcessGroupLockstep::allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                                           const ::c10d::AllgatherOptions& opts)
    -> Ptr<Work> {
  const char* name = "allgather_into_tensor_coalesced";
  require_one_kind(inputs, name);
  require_count(outputs, inputs.size(), name, "the output list");
  require_scaled(outputs, inputs, size_, name, "output");
  at::Tensor flat_in = flat_copy(inputs);
  at::Tensor flat_out = at::empty({size_ * flat_in.numel()}, flat_in.options());
  auto op = group().all_gather(view_of(flat_in, name), view_of(flat_out, name),
                               {.timeout = timeout_of(opts.timeout)});
  int size = size_;
  auto finish = [flat_out, outputs, inputs, size] {
    int64_t total = flat_out.numel() / size, offset = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int64_t n = inputs[i].numel();
      auto blocks = flat_out.view({size, total}).narrow(1, offset, n);  // [rank][element]
      outputs[i].copy_(blocks.reshape(outputs[i].sizes()));
      offset += n;
    }
  };
  return issue({.type = ::c10d::OpType::COALESCED,
                .outputs = outputs,
                .inputs = inputs,
                .keep_alive = {flat_in, flat_out},
                .finish = finish},
               {op});
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
  auto op = group().gather(
      in_view, out_view,
      {.root = static_cast<int>(opts.rootRank), .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::GATHER,
                .outputs = outs,
                .inputs = inputs,
                .keep_alive = {s.buffer, flat},
                .finish =
                    [flat, outs, root] {
                      if (root) unflatten_into(flat, outs);
                    }},
               {op});
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
  auto op = group().scatter(
      in_view, view_of(s.buffer, "scatter"),
      {.root = static_cast<int>(opts.rootRank), .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::SCATTER,
                .outputs = outputs,
                .keep_alive = {flat, s.buffer},
                .finish = [s] { s.write_back(); }},
               {op});
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
  auto op =
      group().reduce_scatter(view_of(flat, "reduce_scatter"), view_of(s.buffer, "reduce_scatter"),
                             {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::REDUCE_SCATTER,
                .outputs = outputs,
                .keep_alive = {flat, s.buffer},
                .finish = [s] { s.write_back(); }},
               {op});
}

auto ProcessGroupLockstep::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const ::c10d::ReduceScatterOptions& opts)
    -> Ptr<Work> {
  ReduceOp op_kind = reduce_op(opts.reduceOp, "_reduce_scatter_base");
  Staged in = stage(input), out = stage(output);
  auto op = group().reduce_scatter(view_of(in.buffer, "_reduce_scatter_base"),
                                   view_of(out.buffer, "_reduce_scatter_base"),
                                   {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::_REDUCE_SCATTER_BASE,
                .outputs = {output},
                .keep_alive = {in.buffer, out.buffer},
                .finish = [out] { out.write_back(); }},
               {op});
}

// Rank r gets outputs[i] = slot r of the reduced inputs[i]: the inputs are laid out rank-major
// (every input's slot 0, then every input's slot 1, ...) for one reduce_scatter.
auto ProcessGroupLockstep::reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                                           const ::c10d::ReduceScatterOptions& opts)
    -> Ptr<Work> {
  const char* name = "reduce_scatter_tensor_coalesced";
  require_one_kind(inputs, name);
  require_count(outputs, inputs.size(), name, "the output list");
  require_scaled(inputs, outputs, size_, name, "input");
  Tensors slots;  // [rank][input]
  for (int r = 0; r < size_; ++r)
    for (size_t i = 0; i < inputs.size(); ++i)
      slots.push_back(
          inputs[i].reshape({-1}).narrow(0, r * outputs[i].numel(), outputs[i].numel()));
  at::Tensor flat_in = at::cat(slots);
  at::Tensor flat_out = at::empty({flat_in.numel() / size_}, flat_in.options());
  ReduceOp op_kind = reduce_op(opts.reduceOp, name);
  auto op = group().reduce_scatter(view_of(flat_in, name), view_of(flat_out, name),
                                   {.op = op_kind, .timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::COALESCED,
                .outputs = outputs,
                .keep_alive = {flat_in, flat_out},
                .finish = [flat_out, outputs] { unflatten_into(flat_out, outputs); }},
               {op});
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
  auto op = group().all_to_all_v(view_of(in.buffer, "alltoall_base"), send,
                                 view_of(out.buffer, "alltoall_base"), recv,
                                 {.timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::ALLTOALL_BASE,
                .outputs = {output},
                .inputs = {input},
                .keep_alive = {in.buffer, out.buffer},
                .finish = [out] { out.write_back(); }},
               {op});
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
  auto op = group().all_to_all_v(view_of(flat_in, "alltoall"), send, view_of(flat_out, "alltoall"),
                                 recv, {.timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::ALLTOALL,
                .outputs = outputs,
                .inputs = inputs,
                .keep_alive = {flat_in, flat_out},
                .finish = [flat_out, outputs] { unflatten_into(flat_out, outputs); }},
               {op});
}

auto ProcessGroupLockstep::barrier(const ::c10d::BarrierOptions& opts) -> Ptr<Work> {
  auto op = group().barrier({.timeout = timeout_of(opts.timeout)});
  return issue({.type = ::c10d::OpType::BARRIER, .outputs = {}}, {op});
}

void ProcessGroupLockstep::monitoredBarrier(const ::c10d::BarrierOptions& opts, bool) {
  // lockstep's monitored barrier always names every rank that did not arrive.
  group().monitored_barrier(timeout_of(opts.timeout));
}

auto ProcessGroupLockstep::send(Tensors& tensors, int dst, int tag) -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "send");
  Staged s = stage(t);
  auto op = group().send(view_of(s.buffer, "send"), dst, {.tag = static_cast<uint32_t>(tag)});
  return issue({.type = ::c10d::OpType::SEND, .outputs = tensors, .keep_alive = {s.buffer}}, {op},
               false);
}

auto ProcessGroupLockstep::recv(Tensors& tensors, int src, int tag) -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "recv");
  Staged s = stage(t);
  auto op = group().recv(view_of(s.buffer, "recv"), src, {.tag = static_cast<uint32_t>(tag)});
  return issue({.type = ::c10d::OpType::RECV,
                .outputs = tensors,
                .keep_alive = {s.buffer},
                .finish = [s] { s.write_back(); },
                .source_rank = src},
               {op}, false);
}

auto ProcessGroupLockstep::recvAnysource(Tensors& tensors, int tag) -> Ptr<Work> {
  const at::Tensor& t = single(tensors, "recv");
  Staged s = stage(t);
  auto op = group().recv_any(view_of(s.buffer, "recv"), {.tag = static_cast<uint32_t>(tag)});
  return issue({.type = ::c10d::OpType::RECVANYSOURCE,
                .outputs = tensors,
                .keep_alive = {s.buffer},
                .finish = [s] { s.write_back(); },
                .source_rank = -1,
                .any_source = true},
               {op}, false);
}

void ProcessGroupLockstep::startCoalescing() {
  if (coalescing_)
    throw InvalidArgument(
        "lockstep startCoalescing: already coalescing (call endCoalescing first)");
  coalescing_ = true;
  coalesced_.clear();
}

auto ProcessGroupLockstep::endCoalescing() -> Ptr<Work> {
  if (!coalescing_) throw InvalidArgument("lockstep endCoalescing: startCoalescing was not called");
  coalescing_ = false;
  return work_for({.type = ::c10d::OpType::COALESCED, .outputs = {}}, std::move(coalesced_));
}

auto ProcessGroupLockstep::issue(WorkSpec spec, std::vector<WorkPtr> ops, bool collective)
    -> Ptr<Work> {
  if (collective) ++collectives_;
  if (coalescing_) coalesced_.insert(coalesced_.end(), ops.begin(), ops.end());
  return work_for(std::move(spec), std::move(ops));
}

}  // namespace lockstep::c10d_backend
