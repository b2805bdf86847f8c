// ProcessGroup front end: validates each call on the caller's thread, normalises it into an Op
// (src/group/op.h) and queues it on the progress thread. The backend does the communication.
#include "lockstep/group/process_group.h"

#include <algorithm>
#include <numeric>

#include "debug/fingerprint_check.h"
#include "debug/monitored_barrier.h"
#include "debug/watchdog.h"
#include "group/backend.h"
#include "group/op.h"
#include "group/progress_queue.h"
#include "group/validate.h"
#include "lockstep/core/error.h"
#include "lockstep/core/log.h"
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

ProcessGroup::ProcessGroup(GroupConfig config) : config_(std::move(config)) {
  LOCKSTEP_ENFORCE(config_.size >= 1, InvalidArgument, "group '", config_.name, "': size ",
                   config_.size, " must be at least 1");
  validate::rank_in_group("ProcessGroup", "rank", config_.rank, config_.size);
  LOCKSTEP_ENFORCE(config_.store != nullptr, InvalidArgument, "group '", config_.name,
                   "' needs a store");
  if (config_.global_ranks.empty()) {
    config_.global_ranks.resize(static_cast<size_t>(config_.size));
    std::iota(config_.global_ranks.begin(), config_.global_ranks.end(), 0);
  }
  send_seq_.assign(static_cast<size_t>(config_.size), 0);
  recv_seq_.assign(static_cast<size_t>(config_.size), 0);
  backend_ = create_backend(config_);
  const bool detail = settings().debug == DebugLevel::detail;
  if (detail) backend_ = debug::with_fingerprints(std::move(backend_), config_);
  log_info("group '", config_.name, "' created: rank ", config_.rank, " of ", config_.size,
           ", global ranks [", ranks_text(config_.global_ranks), "], backend ", backend_->name(),
           detail ? ", collective fingerprints checked (LOCKSTEP_DEBUG=DETAIL)" : "");
  queue_ = std::make_unique<ProgressQueue>(*backend_, start_watchdog());
}

QueueHooks ProcessGroup::start_watchdog() {
  if (settings().flight_recorder_size == 0) return {};
  watchdog_ = std::make_unique<debug::Watchdog>(debug::WatchdogOptions{
      .group = config_.name,
      .rank = config_.rank,
      .size = config_.size,
      .global_rank = config_.global_ranks[static_cast<size_t>(config_.rank)],
      .global_ranks = config_.global_ranks,
      .host = config_.hostname,
      .backend = backend_->name(),
      .store = config_.store,
      .report_store = config_.report_store,
      .timeout = config_.timeout,
      .stall_warning = settings().stall_warning,
      .recorder_size = static_cast<size_t>(settings().flight_recorder_size),
      .trace_dir = settings().trace_dir});
  debug::Watchdog* w = watchdog_.get();
  return {.recorder = &w->recorder(),
          .explain_failure = [w](const Op& op, const std::string& what, bool timed_out) {
            return w->explain_failure(op, what, timed_out);
          }};
}

ProcessGroup::~ProcessGroup() {
  queue_->drain();
  bool broken = queue_->broken();
  queue_.reset();
  // A broken group has already told its peers (Backend::abort); an intact one says goodbye and
  // lingers a little so that slower peers finish their last ops first.
  if (!broken) {
    try {
      backend_->shutdown(Deadline::after(std::min(config_.timeout, milliseconds(60'000))));
    } catch (...) {
      // Destructors do not throw; the peers see the connection close.
    }
  }
}

const std::string& ProcessGroup::backend_name() const { return backend_->name(); }

WorkPtr ProcessGroup::enqueue(Op op, std::chrono::milliseconds timeout) {
  if (op.kind != OpKind::barrier) {  // a barrier has no buffers
    std::string problem = backend_->device_problem(op.device);
    LOCKSTEP_ENFORCE(problem.empty(), InvalidArgument, op_kind_name(op.kind), ": rank ", rank(),
                     " passed a ", device_name(op.device), " buffer, but ", problem);
  }
  std::lock_guard<std::mutex> lock(issue_mu_);
  if (op.kind == OpKind::send) {
    op.seq = send_seq_[static_cast<size_t>(op.peer)]++;
  } else if (op.kind == OpKind::recv) {
    op.seq = recv_seq_[static_cast<size_t>(op.peer)]++;
  } else {
    op.seq = seq_++;
  }
  op.deadline = Deadline::after(timeout.count() < 0 ? config_.timeout : timeout);
  return queue_->push(std::move(op));
}

WorkPtr ProcessGroup::broadcast(BufferView buffer, const BroadcastOptions& o) {
  validate::rank_in_group("broadcast", "root", o.root, size());
  validate::has_data("broadcast", "buffer", buffer);
  return enqueue({.kind = OpKind::broadcast, .dtype = buffer.dtype, .root = o.root, .tag = o.tag,
                  .algorithm = o.algorithm, .input = buffer.data, .output = buffer.data,
                  .count = buffer.count, .device = buffer.device},
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
  return enqueue({.kind = OpKind::all_reduce, .dtype = input.dtype, .reduce_op = o.op,
                  .tag = o.tag, .algorithm = o.algorithm, .input = input.data,
                  .output = output.data, .count = input.count, .device = input.device},
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
  return enqueue({.kind = OpKind::reduce, .dtype = input.dtype, .reduce_op = o.op,
                  .root = o.root, .tag = o.tag, .input = input.data,
                  .output = root ? output.data : nullptr, .count = input.count,
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
  return enqueue({.kind = OpKind::all_gather, .dtype = input.dtype, .tag = o.tag,
                  .input = input.data, .output = output.data,
                  .counts = uniform(size(), input.count), .device = input.device},
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
  return enqueue({.kind = OpKind::all_gather, .variable = true, .dtype = input.dtype,
                  .tag = o.tag, .input = input.data, .output = output.data,
                  .counts = {counts.begin(), counts.end()}, .device = input.device},
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
  return enqueue({.kind = OpKind::gather, .dtype = input.dtype, .root = o.root, .tag = o.tag,
                  .input = input.data, .output = root ? output.data : nullptr,
                  .counts = uniform(size(), input.count), .device = input.device},
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
  return enqueue({.kind = OpKind::gather, .variable = true, .dtype = input.dtype,
                  .root = o.root, .tag = o.tag, .input = input.data,
                  .output = root ? output.data : nullptr, .counts = {counts.begin(), counts.end()},
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
  return enqueue({.kind = OpKind::scatter, .dtype = output.dtype, .root = o.root, .tag = o.tag,
                  .input = root ? input.data : nullptr, .output = output.data,
                  .counts = uniform(size(), output.count), .device = output.device},
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
  return enqueue({.kind = OpKind::scatter, .variable = true, .dtype = output.dtype,
                  .root = o.root, .tag = o.tag, .input = root ? input.data : nullptr,
                  .output = output.data, .counts = {counts.begin(), counts.end()},
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
  return enqueue({.kind = OpKind::reduce_scatter, .dtype = input.dtype, .reduce_op = o.op,
                  .tag = o.tag, .input = input.data, .output = output.data,
                  .counts = uniform(size(), output.count), .device = input.device},
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
  return enqueue({.kind = OpKind::reduce_scatter, .variable = true, .dtype = input.dtype,
                  .reduce_op = o.op, .tag = o.tag, .input = input.data, .output = output.data,
                  .counts = {counts.begin(), counts.end()}, .device = input.device},
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
  return enqueue({.kind = OpKind::all_to_all, .dtype = input.dtype, .tag = o.tag,
                  .input = input.data, .output = output.data, .counts = per_rank,
                  .recv_counts = per_rank, .device = input.device},
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
  return enqueue({.kind = OpKind::all_to_all, .variable = true, .dtype = input.dtype,
                  .tag = o.tag, .input = input.data, .output = output.data,
                  .counts = {send_counts.begin(), send_counts.end()},
                  .recv_counts = {recv_counts.begin(), recv_counts.end()}, .device = input.device},
                 o.timeout);
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& o) {
  return enqueue({.kind = OpKind::barrier, .dtype = DType::u8}, o.timeout);
}

WorkPtr ProcessGroup::send(ConstBufferView input, int dst, const P2POptions& o) {
  validate::rank_in_group("send", "destination", dst, size());
  LOCKSTEP_ENFORCE(dst != rank(), InvalidArgument, "send: rank ", rank(),
                   " cannot send to itself; copy the buffer instead");
  validate::has_data("send", "input", input);
  return enqueue({.kind = OpKind::send, .dtype = input.dtype, .peer = dst, .tag = o.tag,
                  .input = input.data, .count = input.count, .device = input.device},
                 o.timeout);
}

WorkPtr ProcessGroup::recv(BufferView output, int src, const P2POptions& o) {
  validate::rank_in_group("recv", "source", src, size());
  LOCKSTEP_ENFORCE(src != rank(), InvalidArgument, "recv: rank ", rank(),
                   " cannot receive from itself");
  validate::has_data("recv", "output", output);
  return enqueue({.kind = OpKind::recv, .dtype = output.dtype, .peer = src, .tag = o.tag,
                  .output = output.data, .count = output.count, .device = output.device},
                 o.timeout);
}

void ProcessGroup::monitored_barrier(std::chrono::milliseconds timeout) {
  uint64_t index;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    index = monitored_barriers_++;
  }
  debug::monitored_barrier(*config_.store,
                           {.group = config_.name,
                            .rank = rank(),
                            .size = size(),
                            .index = index,
                            .timeout = timeout.count() < 0 ? config_.timeout : timeout});
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
    std::lock_guard<std::mutex> lock(issue_mu_);
    index = ++subgroups_;
  }
  auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) return nullptr;
  GroupConfig sub = config_;
  sub.name = config_.name + "/" + std::to_string(index);
  sub.rank = static_cast<int>(me - ranks.begin());
  sub.size = static_cast<int>(ranks.size());
  sub.global_ranks.clear();
  for (int r : ranks) sub.global_ranks.push_back(config_.global_ranks[static_cast<size_t>(r)]);
  if (!options.backend.empty()) sub.backend = options.backend;
  if (options.timeout.count() >= 0) sub.timeout = options.timeout;
  return std::make_shared<ProcessGroup>(std::move(sub));
}

}  // namespace lockstep
