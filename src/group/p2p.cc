// ProcessGroup's point-to-point calls: checked and numbered on the caller's thread, then handed
// to the group's p2p engine (src/p2p/engine.h), which progresses them on its own. Backends
// without a p2p channel (nccl) run sends and recvs through the progress queue instead.
#include <exception>
#include <span>
#include <vector>

#include "comm/validate.h"
#include "core/coarse_clock.h"
#include "core/log.h"
#include "group/p2p_channels.h"
#include "group/process_group_impl.h"
#include "lockstep/core/error.h"
#include "lockstep/group/process_group.h"

namespace lockstep {

void ProcessGroup::Impl::start_p2p() {
  if (config.size < 2) return;
  auto channel = make_p2p_channel(config, backend->name());
  if (!channel) return;
  channel->connect_all(Deadline::after(config.timeout));
  log_info("group '", config.name, "': point-to-point over a ", channel->kind(), " channel");
  p2p = std::make_unique<p2p::Engine>(std::move(channel), config);
}

void ProcessGroup::Impl::close_p2p(const std::string& failure) {
  if (!p2p) return;
  const std::string here = detail::concat("rank ", config.rank,
                                          " destroyed its process group while this op was pending");
  const std::string peers =
      failure.empty()
          ? detail::concat("rank ", config.rank, " destroyed its process group (it posted no "
                           "more sends or recvs for this rank)")
          : failure;
  // No bye to the ranks of a host the collectives found unreachable: it would wait out the
  // linger in a connect (a partitioned job's node exited 2 s after its rank's error).
  const std::vector<int> unreachable = backend->unreachable_ranks();
  p2p->close(here, peers, Deadline::after(std::chrono::seconds(2)), unreachable);
  p2p.reset();
}

// On the cheap clock (every send and recv takes one): never early, at most kCoarseClockLag late.
Deadline ProcessGroup::Impl::p2p_deadline(std::chrono::milliseconds timeout) const {
  return Deadline(coarse_now() + kCoarseClockLag + (timeout.count() < 0 ? config.timeout : timeout));
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

p2p::Request ProcessGroup::Impl::p2p_request(const P2POp& op, bool any_source) {
  const char* what = op.is_send ? "send" : "recv";
  const ConstBufferView buffer = check_p2p(op, any_source);
  LOCKSTEP_ENFORCE(!buffer.device.is_cuda() || buffer.count == 0, InvalidArgument, what,
                   ": rank ", config.rank, " passed a ", device_name(buffer.device),
                   " buffer, but backend ", backend->name(),
                   " starts host-memory messages only here (send and recv take CUDA buffers one "
                   "by one, through nccl under auto)");
  p2p::Request r{.is_send = op.is_send,
                 .peer = any_source ? p2p::kAnySource : op.peer,
                 .tag = op.tag,
                 .dtype = buffer.dtype,
                 .count = buffer.count,
                 .input = op.input.data,
                 .output = op.output.data};
  std::lock_guard<std::mutex> lock(issue_mu);
  r.seq = any_source ? any_recv_seq++
                     : (op.is_send ? send_seq : recv_seq)[static_cast<size_t>(op.peer)]++;
  return r;
}

WorkPtr ProcessGroup::send(ConstBufferView input, int dst, const P2POptions& o) {
  if (!impl_->p2p || input.device.is_cuda()) {  // nccl moves CUDA buffers itself
    impl_->check_p2p(P2POp::send(input, dst, o.tag), false);
    return impl_->enqueue({.kind = OpKind::send, .dtype = input.dtype, .peer = dst, .tag = o.tag,
                           .input = input.data, .count = input.count, .device = input.device},
                          o.timeout);
  }
  p2p::Request r = impl_->p2p_request(P2POp::send(input, dst, o.tag), false);
  return impl_->p2p->post(std::span(&r, 1), impl_->p2p_deadline(o.timeout),
                          detail::Description::later<&p2p::describe>(r));
}

WorkPtr ProcessGroup::recv(BufferView output, int src, const P2POptions& o) {
  if (!impl_->p2p || output.device.is_cuda()) {
    impl_->check_p2p(P2POp::recv(output, src, o.tag), false);
    return impl_->enqueue({.kind = OpKind::recv, .dtype = output.dtype, .peer = src, .tag = o.tag,
                           .output = output.data, .count = output.count, .device = output.device},
                          o.timeout);
  }
  p2p::Request r = impl_->p2p_request(P2POp::recv(output, src, o.tag), false);
  return impl_->p2p->post(std::span(&r, 1), impl_->p2p_deadline(o.timeout),
                          detail::Description::later<&p2p::describe>(r));
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
  p2p::Request r = impl_->p2p_request(P2POp::recv(output, 0, o.tag), true);
  return impl_->p2p->post(std::span(&r, 1), impl_->p2p_deadline(o.timeout),
                          detail::Description::later<&p2p::describe>(r));
}

namespace {

// Whether batch_isend_irecv goes through the progress queue: every op on a CUDA buffer, or no
// engine at all. A batch that mixes host and CUDA buffers is refused: its two halves would
// progress on different paths, so the batch could not complete as one.
bool batch_through_queue(std::span<const P2POp> ops, bool has_engine, int rank) {
  size_t cuda = 0;
  for (const P2POp& op : ops) {
    const Device d = op.is_send ? op.input.device : op.output.device;
    if (d.is_cuda()) ++cuda;
  }
  LOCKSTEP_ENFORCE(cuda == 0 || cuda == ops.size(), InvalidArgument, "batch_isend_irecv: rank ",
                   rank, " mixed ", cuda, " CUDA buffer(s) with ", ops.size() - cuda,
                   " host buffer(s) in one batch; a batch runs on one path (nccl for CUDA "
                   "buffers, the p2p engine for host ones), so split it into two batches");
  return !has_engine || cuda > 0;
}

}  // namespace

WorkPtr ProcessGroup::batch_isend_irecv(std::span<const P2POp> ops,
                                        std::chrono::milliseconds timeout) {
  if (!ops.empty() && batch_through_queue(ops, impl_->p2p != nullptr, rank())) {
    std::vector<Op> queued;
    for (const P2POp& op : ops) {
      const ConstBufferView buffer = impl_->check_p2p(op, false);
      Op o{.kind = op.is_send ? OpKind::send : OpKind::recv,
           .dtype = buffer.dtype,
           .peer = op.peer,
           .tag = op.tag,
           .input = op.is_send ? op.input.data : nullptr,
           .output = op.is_send ? nullptr : op.output.data,
           .count = buffer.count,
           .device = buffer.device};
      queued.push_back(std::move(o));
    }
    uint64_t index;
    {
      std::lock_guard<std::mutex> lock(impl_->issue_mu);
      index = impl_->p2p_batches++;
    }
    std::string d = detail::concat("batch_isend_irecv #", index, " (", ops.size(),
                                   " sends and recvs)");
    return impl_->enqueue_p2p_group(std::move(queued), timeout, std::move(d));
  }
  std::vector<p2p::Request> requests;
  std::string names;
  for (const P2POp& op : ops) {
    requests.push_back(impl_->p2p_request(op, false));
    names += (names.empty() ? "" : ", ") + p2p::name_of(requests.back());
  }
  uint64_t index;
  {
    std::lock_guard<std::mutex> lock(impl_->issue_mu);
    index = impl_->p2p_batches++;
  }
  std::string d = detail::concat("batch_isend_irecv #", index, " (", names, ")");
  if (!impl_->p2p) {  // empty: nothing to do
    auto [work, completion] = detail::WorkAccess::make(d);
    detail::WorkAccess::complete(completion);
    return work;
  }
  return impl_->p2p->post(requests, impl_->p2p_deadline(timeout), std::move(d));
}

}  // namespace lockstep
