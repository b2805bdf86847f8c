// ProcessGroup's point-to-point calls. Each becomes an Op (src/comm/op.h) and goes through the
// group's one front door, Impl::enqueue_p2p: numbered per pair and direction, given its deadline
// and its flight-recorder entry on the caller's thread, then handed to the group's p2p engine
// (src/p2p/engine.h), which progresses it on its own. Backends without a p2p channel (nccl), and
// CUDA buffers under auto, run sends and recvs through the progress queue instead, where the
// recorder sees them like collectives.
#include <exception>
#include <span>
#include <vector>

#include "comm/validate.h"
#include "core/coarse_clock.h"
#include "core/log.h"
#include "group/backend_registry.h"
#include "group/process_group_impl.h"
#include "lockstep/core/error.h"
#include "lockstep/group/process_group.h"

namespace lockstep {

namespace {

// The engine's form of an accepted send or recv (peer kAnySource for a recv from any rank).
p2p::Request request_of(const Op& op, Clock::time_point posted) {
  return {.is_send = op.kind == OpKind::send,
          .peer = op.peer,
          .tag = op.tag,
          .dtype = op.dtype,
          .count = op.count,
          .input = op.input,
          .output = op.output,
          .seq = op.seq,
          .record_id = op.record_id,
          .posted = posted};
}

Op op_of(const P2POp& p, int peer, const ConstBufferView& buffer) {
  return {.kind = p.is_send ? OpKind::send : OpKind::recv,
          .dtype = buffer.dtype,
          .peer = peer,
          .tag = p.tag,
          .input = p.is_send ? p.input.data : nullptr,
          .output = p.is_send ? nullptr : p.output.data,
          .count = buffer.count,
          // Set by the front door: no clock read here (the default one reads the precise clock,
          // a measurable share of a 4-byte shm round trip).
          .deadline = Deadline(Clock::time_point{}),
          .device = buffer.device};
}

// Whether the ops' buffers are CUDA memory (then nccl moves them, through the progress queue).
// A batch that mixes host and CUDA buffers is refused: its two halves would progress on
// different paths, so the batch could not complete as one.
bool on_cuda(std::span<const Op> ops, int rank) {
  size_t cuda = 0;
  for (const Op& op : ops)
    if (op.device.is_cuda()) ++cuda;
  LOCKSTEP_ENFORCE(cuda == 0 || cuda == ops.size(), InvalidArgument, "batch_isend_irecv: rank ",
                   rank, " mixed ", cuda, " CUDA buffer(s) with ", ops.size() - cuda,
                   " host buffer(s) in one batch; a batch runs on one path (nccl for CUDA "
                   "buffers, the p2p engine for host ones), so split it into two batches");
  return cuda > 0;
}

}  // namespace

void ProcessGroup::Impl::start_p2p() {
  if (config.size < 2) return;
  auto channel = create_p2p_channel(config, *backend);
  if (!channel) return;
  channel->connect_all(Deadline::after(config.timeout));
  log_info("group '", config.name, "': point-to-point over a ", channel->kind(), " channel");
  p2p = std::make_unique<p2p::Engine>(std::move(channel), config,
                                      watchdog ? &watchdog->recorder() : nullptr);
}

void ProcessGroup::Impl::close_p2p(const std::string& failure) {
  if (!p2p) return;
  const std::string here = detail::concat("rank ", config.rank,
                                          " destroyed its process group while this op was pending");
  const std::string peers = failure.empty()
                                ? detail::concat("rank ", config.rank,
                                                 " destroyed its process group (it posted no "
                                                 "more sends or recvs for this rank)")
                                : failure;
  // No bye to the ranks of a host the collectives found unreachable: it would wait out the
  // linger in a connect (a partitioned job's node exited 2 s after its rank's error).
  const std::vector<int> unreachable = backend->unreachable_ranks();
  p2p->close(here, peers, Deadline::after(std::chrono::seconds(2)), unreachable);
  p2p.reset();
}

ConstBufferView ProcessGroup::Impl::check_p2p(const P2POp& op, bool any_source) const {
  const char* what = op.is_send ? "send" : "recv";
  if (!any_source) {
    validate::rank_in_group(what, op.is_send ? "destination" : "source", op.peer, config.size);
    LOCKSTEP_ENFORCE(op.peer != config.rank, InvalidArgument, what, ": rank ", config.rank,
                     op.is_send ? " cannot send to itself; copy the buffer instead"
                                : " cannot receive from itself");
  }
  ConstBufferView buffer = op.is_send ? op.input : ConstBufferView(op.output);
  validate::has_data(what, op.is_send ? "input" : "output", buffer);
  return buffer;
}

WorkPtr ProcessGroup::Impl::enqueue_p2p(std::span<Op> ops, std::chrono::milliseconds timeout,
                                        bool batch) {
  // Host memory goes to the engine, which every backend's channel moves.
  const bool engine = p2p != nullptr && !on_cuda(ops, config.rank);
  if (!engine)
    for (const Op& op : ops)
      check_device(op, batch ? "batch_isend_irecv" : op_kind_name(op.kind),
                   batch ? detail::concat(" to ", op_kind_name(op.kind)) : "");
  const auto number = [&](Op& op, std::vector<uint64_t>& sends, std::vector<uint64_t>& recvs,
                          uint64_t& any) -> uint64_t& {
    if (op.peer == p2p::kAnySource) return any;
    return (op.kind == OpKind::send ? sends : recvs)[static_cast<size_t>(op.peer)];
  };
  std::unique_lock<std::mutex> lock(issue_mu);
  if (!batch) {
    // The fast path of one send or recv: numbered in place (a rejected op takes no number).
    Op& op = ops[0];
    uint64_t& next = number(op, send_seq, recv_seq, any_recv_seq);
    op.seq = next;
    if (!engine) {
      backend->check(op);
      backend->prepare(op);
    }
    ++next;
  } else {
    // Every op is checked under the number it would get before any takes one, so a rejected
    // batch leaves the numbering as it was.
    std::vector<uint64_t> next_send = send_seq, next_recv = recv_seq;
    uint64_t next_any = any_recv_seq;
    for (Op& op : ops) {
      op.seq = number(op, next_send, next_recv, next_any)++;
      if (!engine) {
        backend->check(op);
        backend->prepare(op);
      }
    }
    send_seq = std::move(next_send);
    recv_seq = std::move(next_recv);
    any_recv_seq = next_any;
  }
  // "batch_isend_irecv #3 (send #0 to rank 1, recv #0 from rank 1)"; through the queue, only how
  // many (nccl's batches can be long).
  std::string description;
  if (batch) {
    std::string names;
    for (const Op& op : ops) names += (names.empty() ? "" : ", ") + op.name();
    description =
        detail::concat("batch_isend_irecv #", p2p_batches++, " (",
                       engine ? names : std::to_string(ops.size()) + " sends and recvs", ")");
  }
  if (!engine) {
    const Deadline deadline = Deadline::after(timeout_or_group(timeout));
    for (Op& op : ops) op.deadline = deadline;
    if (!batch) return queue->push(std::move(ops[0]));
    std::vector<Op> group(std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
    return queue->push_group(std::move(group), std::move(description));
  }
  if (ops.empty()) return detail::WorkAccess::make_completed(std::move(description));
  // On the cheap clock (every send and recv takes one): never early, at most kCoarseClockLag late.
  // The one reading is the deadline's and the journal's.
  const Clock::time_point now = coarse_now();
  const Deadline deadline(now + kCoarseClockLag + timeout_or_group(timeout));
  for (Op& op : ops) op.deadline = deadline;
  if (watchdog)
    for (Op& op : ops) op.record_id = watchdog->recorder().on_p2p_posted(op, now);
  lock.unlock();
  if (!batch) {
    p2p::Request r = request_of(ops[0], now);
    return p2p->post(std::span(&r, 1), deadline, detail::Description::later<&p2p::describe>(r));
  }
  std::vector<p2p::Request> requests;
  requests.reserve(ops.size());
  for (const Op& op : ops) requests.push_back(request_of(op, now));
  return p2p->post(requests, deadline, std::move(description));
}

WorkPtr ProcessGroup::send(ConstBufferView input, int dst, const P2POptions& o) {
  const P2POp p = P2POp::send(input, dst, o.tag);
  return impl_->enqueue(op_of(p, dst, impl_->check_p2p(p, false)), o.timeout);
}

WorkPtr ProcessGroup::recv(BufferView output, int src, const P2POptions& o) {
  const P2POp p = P2POp::recv(output, src, o.tag);
  return impl_->enqueue(op_of(p, src, impl_->check_p2p(p, false)), o.timeout);
}

WorkPtr ProcessGroup::isend(ConstBufferView input, int dst, const P2POptions& o) {
  return send(input, dst, o);
}

WorkPtr ProcessGroup::irecv(BufferView output, int src, const P2POptions& o) {
  return recv(output, src, o);
}

WorkPtr ProcessGroup::recv_any(BufferView output, const P2POptions& o) {
  LOCKSTEP_ENFORCE(size() > 1, InvalidArgument, "recv_any: group '", name(),
                   "' has one rank: there is no other rank to receive from");
  LOCKSTEP_ENFORCE(impl_->p2p != nullptr, InvalidArgument, "recv_any: backend ", backend_name(),
                   " cannot receive from any source; use recv with a source rank");
  const P2POp p = P2POp::recv(output, 0, o.tag);
  const ConstBufferView buffer = impl_->check_p2p(p, true);
  LOCKSTEP_ENFORCE(!buffer.device.is_cuda() || buffer.count == 0, InvalidArgument, "recv: rank ",
                   rank(), " passed a ", device_name(buffer.device), " buffer, but backend ",
                   backend_name(),
                   " starts host-memory messages only here (send and recv take CUDA buffers one "
                   "by one, through nccl under auto)");
  Op op = op_of(p, p2p::kAnySource, buffer);
  op.device = Device{};  // an empty CUDA view moves nothing: the engine takes it
  return impl_->enqueue(std::move(op), o.timeout);
}

WorkPtr ProcessGroup::batch_isend_irecv(std::span<const P2POp> ops,
                                        std::chrono::milliseconds timeout) {
  std::vector<Op> batch;
  batch.reserve(ops.size());
  for (const P2POp& p : ops) batch.push_back(op_of(p, p.peer, impl_->check_p2p(p, false)));
  return impl_->enqueue_p2p(batch, timeout, true);
}

}  // namespace lockstep
