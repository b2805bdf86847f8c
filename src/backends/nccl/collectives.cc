#include "backends/nccl/collectives.h"

#include <numeric>
#include <vector>

#include "backends/nccl/cuda_util.h"
#include "backends/nccl/nccl_types.h"
#include "comm/op_identity.h"
#include "lockstep/core/error.h"

namespace lockstep::nccl {

namespace {

// The NCCL calls of one op, with its element type and error handling in one place.
class Launch {
 public:
  Launch(Communicator& comm, const Op& op)
      : comm_(comm),
        op_(op),
        name_(op.name()),
        type_(nccl_dtype(op.dtype)),
        element_(element_size(op.dtype)) {}

  void call(ncclResult_t result, std::string_view what) {
    comm_.settle(result, what, name_, op_.deadline);
  }
  // Element offsets of each rank's slot for these per-rank counts.
  static std::vector<size_t> offsets(const std::vector<size_t>& counts) {
    std::vector<size_t> out(counts.size(), 0);
    std::exclusive_scan(counts.begin(), counts.end(), out.begin(), size_t{0});
    return out;
  }
  const void* in(size_t element) const {
    return static_cast<const char*>(op_.input) + element * element_;
  }
  void* out(size_t element) const { return static_cast<char*>(op_.output) + element * element_; }

  void send(const void* data, size_t count, int peer) {
    if (count > 0)
      call(ncclSend(data, count, type_, peer, comm_.comm(), comm_.stream()), "ncclSend");
  }
  void recv(void* data, size_t count, int peer) {
    if (count > 0)
      call(ncclRecv(data, count, type_, peer, comm_.comm(), comm_.stream()), "ncclRecv");
  }
  // This rank's own slot: a copy on the stream, unless it is already in place.
  void copy(void* dst, const void* src, size_t count) {
    if (count == 0 || dst == src) return;
    check_cuda(
        cudaMemcpyAsync(dst, src, count * element_, cudaMemcpyDeviceToDevice, comm_.stream()),
        name_ + ": cudaMemcpyAsync");
  }
  // An open ncclGroupStart, ended by end() or, on unwind, by the scope ([Abort] in
  // communicator.h).
  GroupScope group() { return GroupScope(comm_, name_, op_.deadline); }

  ncclRedOp_t reduce_op() const {
    check_reduce_op(op_);
    return *nccl_reduce_op(op_.reduce_op);
  }

  ncclComm_t comm() const { return comm_.comm(); }
  cudaStream_t stream() const { return comm_.stream(); }
  ncclDataType_t type() const { return type_; }

 private:
  Communicator& comm_;
  const Op& op_;
  std::string name_;
  ncclDataType_t type_;
  size_t element_;
};

void all_gather(Launch& l, const Op& op) {
  if (!op.variable) {
    l.call(ncclAllGather(op.input, op.output, op.counts[0], l.type(), l.comm(), l.stream()),
           "ncclAllGather");
    return;
  }
  auto offset = Launch::offsets(op.counts);
  const int size = static_cast<int>(op.counts.size());
  auto group = l.group();
  for (int r = 0; r < size; ++r) {
    size_t n = op.counts[static_cast<size_t>(r)];
    void* slot = l.out(offset[static_cast<size_t>(r)]);
    // Root r sends its input (the others' sendbuff is ignored); everyone, r too, receives into
    // slot r of output.
    if (n > 0)
      l.call(ncclBroadcast(op.input, slot, n, l.type(), r, l.comm(), l.stream()), "ncclBroadcast");
  }
  group.end();
}

void reduce_scatter(Launch& l, const Op& op, int rank) {
  ncclRedOp_t red = l.reduce_op();
  if (!op.variable) {
    l.call(
        ncclReduceScatter(op.input, op.output, op.counts[0], l.type(), red, l.comm(), l.stream()),
        "ncclReduceScatter");
    return;
  }
  auto offset = Launch::offsets(op.counts);
  const int size = static_cast<int>(op.counts.size());
  auto group = l.group();
  for (int r = 0; r < size; ++r) {
    size_t n = op.counts[static_cast<size_t>(r)];
    void* result = r == rank ? op.output : nullptr;  // only root r's result is kept
    if (n > 0)
      l.call(ncclReduce(l.in(offset[static_cast<size_t>(r)]), result, n, l.type(), red, r, l.comm(),
                        l.stream()),
             "ncclReduce");
  }
  group.end();
}

void gather(Launch& l, const Op& op, int rank) {
  const size_t mine = op.counts[static_cast<size_t>(rank)];
  if (rank != op.root) {
    auto group = l.group();
    l.send(op.input, mine, op.root);
    group.end();
    return;
  }
  auto offset = Launch::offsets(op.counts);
  auto group = l.group();
  for (size_t r = 0; r < op.counts.size(); ++r)
    if (static_cast<int>(r) != rank) l.recv(l.out(offset[r]), op.counts[r], static_cast<int>(r));
  group.end();
  l.copy(l.out(offset[static_cast<size_t>(rank)]), op.input, mine);
}

void scatter(Launch& l, const Op& op, int rank) {
  const size_t mine = op.counts[static_cast<size_t>(rank)];
  if (rank != op.root) {
    auto group = l.group();
    l.recv(op.output, mine, op.root);
    group.end();
    return;
  }
  auto offset = Launch::offsets(op.counts);
  auto group = l.group();
  for (size_t r = 0; r < op.counts.size(); ++r)
    if (static_cast<int>(r) != rank) l.send(l.in(offset[r]), op.counts[r], static_cast<int>(r));
  group.end();
  l.copy(op.output, l.in(offset[static_cast<size_t>(rank)]), mine);
}

void all_to_all(Launch& l, const Op& op, int rank) {
  auto send_offset = Launch::offsets(op.counts);
  auto recv_offset = Launch::offsets(op.recv_counts);
  const size_t me = static_cast<size_t>(rank);
  auto group = l.group();
  for (size_t r = 0; r < op.counts.size(); ++r) {
    if (r == me) continue;
    l.send(l.in(send_offset[r]), op.counts[r], static_cast<int>(r));
    l.recv(l.out(recv_offset[r]), op.recv_counts[r], static_cast<int>(r));
  }
  group.end();
  l.copy(l.out(recv_offset[me]), l.in(send_offset[me]), op.counts[me]);
}

}  // namespace

void check_reduce_op(const Op& op) {
  if (!is_reducing(op.kind)) return;
  LOCKSTEP_ENFORCE(nccl_reduce_op(op.reduce_op).has_value(), InvalidArgument, op.name(),
                   ": reduce op ", reduce_op_name(op.reduce_op),
                   " is not available on the nccl backend (NCCL has sum, avg, prod, min and "
                   "max); reduce host buffers with backend shm or tcp instead");
}

void enqueue_p2p_group(Communicator& comm, std::span<const Op> ops) {
  if (ops.empty()) return;
  GroupScope group(comm, ops.front().name(), ops.front().deadline);
  for (const Op& op : ops) {
    Launch l(comm, op);
    if (op.kind == OpKind::send)
      l.send(op.input, op.count, op.peer);
    else
      l.recv(op.output, op.count, op.peer);
  }
  group.end();
}

void enqueue_op(Communicator& comm, const Op& op, int rank) {
  Launch l(comm, op);
  // Ops that every rank agrees move nothing make no NCCL call at all.
  if (op.kind != OpKind::barrier && op.kind != OpKind::all_to_all && op.agreed_bytes() == 0 &&
      op.count == 0)
    return;
  switch (op.kind) {
    case OpKind::broadcast:
      l.call(ncclBroadcast(op.input, op.output, op.count, l.type(), op.root, l.comm(), l.stream()),
             "ncclBroadcast");
      return;
    case OpKind::all_reduce:
      l.call(ncclAllReduce(op.input, op.output, op.count, l.type(), l.reduce_op(), l.comm(),
                           l.stream()),
             "ncclAllReduce");
      return;
    case OpKind::reduce:
      l.call(ncclReduce(op.input, op.output, op.count, l.type(), l.reduce_op(), op.root, l.comm(),
                        l.stream()),
             "ncclReduce");
      return;
    case OpKind::all_gather:
      all_gather(l, op);
      return;
    case OpKind::reduce_scatter:
      reduce_scatter(l, op, rank);
      return;
    case OpKind::gather:
      gather(l, op, rank);
      return;
    case OpKind::scatter:
      scatter(l, op, rank);
      return;
    case OpKind::all_to_all:
      all_to_all(l, op, rank);
      return;
    case OpKind::barrier:
      l.call(ncclAllReduce(comm.scratch(), comm.scratch(), 1, ncclInt32, ncclSum, l.comm(),
                           l.stream()),
             "ncclAllReduce (barrier)");
      return;
    case OpKind::send:
      l.send(op.input, op.count, op.peer);
      return;
    case OpKind::recv:
      l.recv(op.output, op.count, op.peer);
      return;
  }
}

}  // namespace lockstep::nccl
