// ProcessGroup front end: validates each call on the caller's thread, normalises it into an Op
// (src/comm/op.h) and queues it on the progress thread. The backend does the communication.
#include "lockstep/group/process_group.h"

#include <algorithm>
#include <exception>
#include <numeric>

#include "comm/op.h"
#include "comm/validate.h"
#include "core/log.h"
#include "debug/fingerprint.h"
#include "debug/fingerprint_check.h"
#include "debug/monitored_barrier.h"
#include "group/backend_registry.h"
#include "group/process_group_impl.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

namespace lockstep {

namespace {

std::vector<size_t> uniform(int size, size_t count) {
  return std::vector<size_t>(static_cast<size_t>(size), count);
}

std::string times(int size, size_t count) {
  return detail::concat("group size ", size, " x ", count, " per rank");
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

ProcessGroup::ProcessGroup(const GroupConfig& config) : impl_(std::make_unique<Impl>()) {
  Impl& g = *impl_;
  g.config = config;
  GroupConfig& c = g.config;
  LOCKSTEP_ENFORCE(c.size >= 1, InvalidArgument, "group '", c.name, "': size ", c.size,
                   " must be at least 1");
  validate::rank_in_group("ProcessGroup", "rank", c.rank, c.size);
  LOCKSTEP_ENFORCE(c.store != nullptr, InvalidArgument, "group '", c.name, "' needs a store");
  if (c.global_ranks.empty()) {
    c.global_ranks.resize(static_cast<size_t>(c.size));
    std::iota(c.global_ranks.begin(), c.global_ranks.end(), 0);
  }
  c.hostname = host_name_of(c);  // resolved once, for every part of the group
  g.send_seq.assign(static_cast<size_t>(c.size), 0);
  g.recv_seq.assign(static_cast<size_t>(c.size), 0);
  g.backend = create_backend(c);
  const bool detail = settings().debug == DebugLevel::detail;
  if (detail) {
    g.backend = debug::with_fingerprints(std::move(g.backend), c);
    g.issue_order = std::make_unique<debug::IssueOrder>(c.name, c.global_ranks);
  }
  log_info("group '", c.name, "' created: rank ", c.rank, " of ", c.size, ", global ranks [",
           ranks_text(c.global_ranks), "], backend ", g.backend->name(),
           detail ? ", collective fingerprints checked (LOCKSTEP_DEBUG=DETAIL)" : "");
  g.queue = std::make_unique<ProgressQueue>(*g.backend, g.start_watchdog());
  g.start_p2p();
}

QueueHooks ProcessGroup::Impl::start_watchdog() {
  if (settings().flight_recorder_size == 0) return {};
  watchdog = std::make_unique<debug::Watchdog>(
      debug::WatchdogOptions{.group = config.name,
                             .rank = config.rank,
                             .size = config.size,
                             .global_rank = config.global_ranks[static_cast<size_t>(config.rank)],
                             .global_ranks = config.global_ranks,
                             .host = config.hostname,
                             .backend = backend->name(),
                             .store = config.store,
                             .report_store = config.report_store,
                             .timeout = config.timeout,
                             .stall_warning = settings().stall_warning,
                             .recorder_size = static_cast<size_t>(settings().flight_recorder_size),
                             .trace_dir = settings().trace_dir});
  debug::Watchdog* w = watchdog.get();
  return {.recorder = &w->recorder(),
          .explain_failure = [w](const Op& op, const std::string& what, bool timed_out) {
            return w->explain_failure(op, what, timed_out);
          }};
}

ProcessGroup::~ProcessGroup() {
  Impl& g = *impl_;
  // [Leaving by exception] A group destroyed while an exception unwinds its owner's stack has
  // failed: the peers hear that (and where to look), not an orderly goodbye.
  const bool unwinding = std::uncaught_exceptions() > 0;
  const std::string failed =
      detail::concat("rank ", g.config.rank,
                     "'s process group was destroyed while an exception propagated "
                     "through its stack: rank ",
                     g.config.rank,
                     " failed; see its own error (lockstep run's "
                     "summary names the first failure)");
  g.close_p2p(unwinding ? failed : "");
  g.queue->drain();
  bool broken = g.queue->broken();
  g.queue.reset();
  if (unwinding && !broken) {
    g.backend->abort(failed);
    return;
  }
  // A broken group has already told its peers (Backend::abort); an intact one says goodbye and
  // lingers a little so that slower peers finish their last ops first.
  if (!broken) {
    try {
      g.backend->shutdown(Deadline::after(std::min(g.config.timeout, milliseconds(60'000))));
    } catch (...) {
      // Destructors do not throw; the peers see the connection close.
    }
  }
}

int ProcessGroup::rank() const {
  return impl_->config.rank;
}
int ProcessGroup::size() const {
  return impl_->config.size;
}
const std::string& ProcessGroup::name() const {
  return impl_->config.name;
}
const std::string& ProcessGroup::backend_name() const {
  return impl_->backend->name();
}
const std::vector<int>& ProcessGroup::global_ranks() const {
  return impl_->config.global_ranks;
}
const GroupConfig& ProcessGroup::config() const {
  return impl_->config;
}

WorkPtr ProcessGroup::Impl::enqueue(Op op, std::chrono::milliseconds timeout) {
  if (is_p2p(op.kind)) return enqueue_p2p(std::span(&op, 1), timeout, false);
  if (op.kind != OpKind::barrier) check_device(op, op_kind_name(op.kind));  // barrier: no buffers
  std::lock_guard<std::mutex> lock(issue_mu);
  // Checked under the number it would get, which it only takes when the checks pass: a call
  // rejected here leaves the group's numbering, and so the group, as it was.
  op.seq = seq;
  validate::algorithm(op);
  backend->check(op);
  backend->prepare(op);
  ++seq;
  if (issue_order && debug::is_fingerprinted(op.kind)) op.prior_issues = issue_order->note();
  op.deadline = Deadline::after(timeout_or_group(timeout));
  return queue->push(std::move(op));
}

void ProcessGroup::Impl::check_device(const Op& op, std::string_view call,
                                      std::string_view context) const {
  const std::string problem = backend->device_problem(op.device);
  LOCKSTEP_ENFORCE(problem.empty(), InvalidArgument, call, ": rank ", config.rank, " passed a ",
                   device_name(op.device), " buffer", context, ", but ", problem);
}

WorkPtr ProcessGroup::broadcast(BufferView buffer, const BroadcastOptions& o) {
  validate::rank_in_group("broadcast", "root", o.root, size());
  validate::has_data("broadcast", "buffer", buffer);
  return impl_->enqueue({.kind = OpKind::broadcast,
                         .dtype = buffer.dtype,
                         .root = o.root,
                         .tag = o.tag,
                         .algorithm = o.algorithm,
                         .input = buffer.data,
                         .output = buffer.data,
                         .count = buffer.count,
                         .device = buffer.device},
                        o.timeout);
}

WorkPtr ProcessGroup::all_reduce(BufferView buffer, const AllReduceOptions& o) {
  return all_reduce(ConstBufferView(buffer), buffer, o);
}

WorkPtr ProcessGroup::all_reduce(ConstBufferView input, BufferView output,
                                 const AllReduceOptions& o) {
  constexpr std::string_view kOp = "all_reduce";
  validate::reducible(kOp, input.dtype, o.op);
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::count_is(kOp, "output", output, input.count, "the same as input");
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  return impl_->enqueue({.kind = OpKind::all_reduce,
                         .dtype = input.dtype,
                         .reduce_op = o.op,
                         .tag = o.tag,
                         .algorithm = o.algorithm,
                         .input = input.data,
                         .output = output.data,
                         .count = input.count,
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::reduce(ConstBufferView input, BufferView output, const ReduceOptions& o) {
  constexpr std::string_view kOp = "reduce";
  validate::rank_in_group(kOp, "root", o.root, size());
  validate::reducible(kOp, input.dtype, o.op);
  validate::has_data(kOp, "input", input);
  bool root = rank() == o.root;
  if (root) {
    validate::same_dtype(kOp, input, output);
    validate::same_device(kOp, input, output);
    validate::count_is(kOp, "output", output, input.count, "the same as input, on the root");
    validate::has_data(kOp, "output", output);
  }
  return impl_->enqueue({.kind = OpKind::reduce,
                         .dtype = input.dtype,
                         .reduce_op = o.op,
                         .root = o.root,
                         .tag = o.tag,
                         .input = input.data,
                         .output = root ? output.data : nullptr,
                         .count = input.count,
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::all_gather(ConstBufferView input, BufferView output,
                                 const AllGatherOptions& o) {
  constexpr std::string_view kOp = "all_gather";
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::count_is(kOp, "output", output, input.count * size(), times(size(), input.count));
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  return impl_->enqueue({.kind = OpKind::all_gather,
                         .dtype = input.dtype,
                         .tag = o.tag,
                         .input = input.data,
                         .output = output.data,
                         .counts = uniform(size(), input.count),
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::all_gather_v(ConstBufferView input, BufferView output,
                                   std::span<const size_t> counts, const AllGatherOptions& o) {
  constexpr std::string_view kOp = "all_gather_v";
  size_t total = validate::counts_sum(kOp, "counts", counts, size());
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::count_is(kOp, "input", input, counts[static_cast<size_t>(rank())], "counts[rank]");
  validate::count_is(kOp, "output", output, total, "the sum of counts");
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  return impl_->enqueue({.kind = OpKind::all_gather,
                         .variable = true,
                         .dtype = input.dtype,
                         .tag = o.tag,
                         .input = input.data,
                         .output = output.data,
                         .counts = {counts.begin(), counts.end()},
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::gather(ConstBufferView input, BufferView output, const GatherOptions& o) {
  constexpr std::string_view kOp = "gather";
  validate::rank_in_group(kOp, "root", o.root, size());
  validate::has_data(kOp, "input", input);
  bool root = rank() == o.root;
  if (root) {
    validate::same_dtype(kOp, input, output);
    validate::same_device(kOp, input, output);
    validate::count_is(kOp, "output", output, input.count * size(), times(size(), input.count));
    validate::has_data(kOp, "output", output);
  }
  return impl_->enqueue({.kind = OpKind::gather,
                         .dtype = input.dtype,
                         .root = o.root,
                         .tag = o.tag,
                         .input = input.data,
                         .output = root ? output.data : nullptr,
                         .counts = uniform(size(), input.count),
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::gather_v(ConstBufferView input, BufferView output,
                               std::span<const size_t> counts, const GatherOptions& o) {
  constexpr std::string_view kOp = "gather_v";
  validate::rank_in_group(kOp, "root", o.root, size());
  size_t total = validate::counts_sum(kOp, "counts", counts, size());
  validate::count_is(kOp, "input", input, counts[static_cast<size_t>(rank())], "counts[rank]");
  validate::has_data(kOp, "input", input);
  bool root = rank() == o.root;
  if (root) {
    validate::same_dtype(kOp, input, output);
    validate::same_device(kOp, input, output);
    validate::count_is(kOp, "output", output, total, "the sum of counts, on the root");
    validate::has_data(kOp, "output", output);
  }
  return impl_->enqueue({.kind = OpKind::gather,
                         .variable = true,
                         .dtype = input.dtype,
                         .root = o.root,
                         .tag = o.tag,
                         .input = input.data,
                         .output = root ? output.data : nullptr,
                         .counts = {counts.begin(), counts.end()},
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::scatter(ConstBufferView input, BufferView output, const ScatterOptions& o) {
  constexpr std::string_view kOp = "scatter";
  validate::rank_in_group(kOp, "root", o.root, size());
  validate::has_data(kOp, "output", output);
  bool root = rank() == o.root;
  if (root) {
    validate::same_dtype(kOp, input, output);
    validate::same_device(kOp, input, output);
    validate::count_is(kOp, "input", input, output.count * size(), times(size(), output.count));
    validate::has_data(kOp, "input", input);
  }
  return impl_->enqueue({.kind = OpKind::scatter,
                         .dtype = output.dtype,
                         .root = o.root,
                         .tag = o.tag,
                         .input = root ? input.data : nullptr,
                         .output = output.data,
                         .counts = uniform(size(), output.count),
                         .device = output.device},
                        o.timeout);
}

WorkPtr ProcessGroup::scatter_v(ConstBufferView input, BufferView output,
                                std::span<const size_t> counts, const ScatterOptions& o) {
  constexpr std::string_view kOp = "scatter_v";
  validate::rank_in_group(kOp, "root", o.root, size());
  size_t total = validate::counts_sum(kOp, "counts", counts, size());
  validate::count_is(kOp, "output", output, counts[static_cast<size_t>(rank())], "counts[rank]");
  validate::has_data(kOp, "output", output);
  bool root = rank() == o.root;
  if (root) {
    validate::same_dtype(kOp, input, output);
    validate::same_device(kOp, input, output);
    validate::count_is(kOp, "input", input, total, "the sum of counts, on the root");
    validate::has_data(kOp, "input", input);
  }
  return impl_->enqueue({.kind = OpKind::scatter,
                         .variable = true,
                         .dtype = output.dtype,
                         .root = o.root,
                         .tag = o.tag,
                         .input = root ? input.data : nullptr,
                         .output = output.data,
                         .counts = {counts.begin(), counts.end()},
                         .device = output.device},
                        o.timeout);
}

WorkPtr ProcessGroup::reduce_scatter(ConstBufferView input, BufferView output,
                                     const ReduceScatterOptions& o) {
  constexpr std::string_view kOp = "reduce_scatter";
  validate::reducible(kOp, input.dtype, o.op);
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::count_is(kOp, "input", input, output.count * size(), times(size(), output.count));
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  return impl_->enqueue({.kind = OpKind::reduce_scatter,
                         .dtype = input.dtype,
                         .reduce_op = o.op,
                         .tag = o.tag,
                         .input = input.data,
                         .output = output.data,
                         .counts = uniform(size(), output.count),
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::reduce_scatter_v(ConstBufferView input, BufferView output,
                                       std::span<const size_t> counts,
                                       const ReduceScatterOptions& o) {
  constexpr std::string_view kOp = "reduce_scatter_v";
  size_t total = validate::counts_sum(kOp, "counts", counts, size());
  validate::reducible(kOp, input.dtype, o.op);
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::count_is(kOp, "input", input, total, "the sum of counts");
  validate::count_is(kOp, "output", output, counts[static_cast<size_t>(rank())], "counts[rank]");
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  return impl_->enqueue({.kind = OpKind::reduce_scatter,
                         .variable = true,
                         .dtype = input.dtype,
                         .reduce_op = o.op,
                         .tag = o.tag,
                         .input = input.data,
                         .output = output.data,
                         .counts = {counts.begin(), counts.end()},
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::all_to_all(ConstBufferView input, BufferView output,
                                 const AllToAllOptions& o) {
  constexpr std::string_view kOp = "all_to_all";
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::divisible(kOp, "input", input, size());
  validate::count_is(kOp, "output", output, input.count, "the same as input");
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  auto per_rank = uniform(size(), input.count / static_cast<size_t>(size()));
  return impl_->enqueue({.kind = OpKind::all_to_all,
                         .dtype = input.dtype,
                         .tag = o.tag,
                         .input = input.data,
                         .output = output.data,
                         .counts = per_rank,
                         .recv_counts = per_rank,
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::all_to_all_v(ConstBufferView input, std::span<const size_t> send_counts,
                                   BufferView output, std::span<const size_t> recv_counts,
                                   const AllToAllOptions& o) {
  constexpr std::string_view kOp = "all_to_all_v";
  size_t sent = validate::counts_sum(kOp, "send_counts", send_counts, size());
  size_t received = validate::counts_sum(kOp, "recv_counts", recv_counts, size());
  validate::same_dtype(kOp, input, output);
  validate::same_device(kOp, input, output);
  validate::count_is(kOp, "input", input, sent, "the sum of send_counts");
  validate::count_is(kOp, "output", output, received, "the sum of recv_counts");
  validate::has_data(kOp, "input", input);
  validate::has_data(kOp, "output", output);
  return impl_->enqueue({.kind = OpKind::all_to_all,
                         .variable = true,
                         .dtype = input.dtype,
                         .tag = o.tag,
                         .input = input.data,
                         .output = output.data,
                         .counts = {send_counts.begin(), send_counts.end()},
                         .recv_counts = {recv_counts.begin(), recv_counts.end()},
                         .device = input.device},
                        o.timeout);
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& o) {
  return impl_->enqueue({.kind = OpKind::barrier, .dtype = DType::u8}, o.timeout);
}

void ProcessGroup::monitored_barrier(std::chrono::milliseconds timeout) {
  uint64_t index;
  {
    std::lock_guard<std::mutex> lock(impl_->issue_mu);
    index = impl_->monitored_barriers++;
  }
  debug::monitored_barrier(*impl_->config.store, {.group = impl_->config.name,
                                                  .rank = rank(),
                                                  .size = size(),
                                                  .index = index,
                                                  .timeout = impl_->timeout_or_group(timeout)});
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks,
                                                      const NewGroupOptions& options) {
  LOCKSTEP_ENFORCE(!ranks.empty(), InvalidArgument, "new_group: ranks is empty");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    validate::rank_in_group("new_group", "rank", ranks[i], size());
    LOCKSTEP_ENFORCE(i == 0 || ranks[i] != ranks[i - 1], InvalidArgument, "new_group: rank ",
                     ranks[i], " is listed twice");
  }
  uint64_t index;
  {
    std::lock_guard<std::mutex> lock(impl_->issue_mu);
    index = ++impl_->subgroups;
  }
  auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) return nullptr;
  GroupConfig sub = impl_->config;
  sub.name = impl_->config.name + "/" + std::to_string(index);
  sub.rank = static_cast<int>(me - ranks.begin());
  sub.size = static_cast<int>(ranks.size());
  sub.global_ranks.clear();
  for (int r : ranks)
    sub.global_ranks.push_back(impl_->config.global_ranks[static_cast<size_t>(r)]);
  if (!options.backend.empty()) sub.backend = options.backend;
  if (options.timeout.count() >= 0) sub.timeout = options.timeout;
  return std::make_shared<ProcessGroup>(sub);
}

}  // namespace lockstep
