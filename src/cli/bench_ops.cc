#include "cli/bench_ops.h"

#include <algorithm>

namespace lockstep::cli::bench {
namespace {

// Ops whose size column covers n slots, one per rank.
bool sized_by_slots(BenchOp op) {
  return op == BenchOp::all_gather || op == BenchOp::reduce_scatter || op == BenchOp::all_to_all ||
         op == BenchOp::gather || op == BenchOp::scatter;
}

// sendrecv: a ring shift. Even ranks send first and odd ranks receive first, so that a backend
// whose sends block until the peer receives still makes progress for any world size.
void run_sendrecv(ProcessGroup& pg, BufferView input, BufferView output) {
  const int n = pg.size();
  if (n == 1) {
    std::copy_n(static_cast<const std::byte*>(input.data), input.bytes(),
                static_cast<std::byte*>(output.data));
    return;
  }
  const int next = (pg.rank() + 1) % n;
  const int prev = (pg.rank() + n - 1) % n;
  WorkPtr first, second;
  if (pg.rank() % 2 == 0) {
    first = pg.send(input, next);
    second = pg.recv(output, prev);
  } else {
    first = pg.recv(output, prev);
    second = pg.send(input, next);
  }
  first->wait();
  second->wait();
}

// pingpong: rank 2i sends its input to rank 2i+1, which receives it and sends it back; both end
// with rank 2i's input in their output. A last rank of an odd world copies its input.
void run_pingpong(ProcessGroup& pg, BufferView input, BufferView output) {
  const int me = pg.rank();
  if (me % 2 == 0 && me + 1 >= pg.size()) {
    std::copy_n(static_cast<const std::byte*>(input.data), input.bytes(),
                static_cast<std::byte*>(output.data));
    return;
  }
  if (me % 2 == 0) {
    pg.send(input, me + 1)->wait();
    pg.recv(output, me + 1)->wait();
  } else {
    pg.recv(output, me - 1)->wait();
    pg.send(output, me - 1)->wait();
  }
}

}  // namespace

Layout layout_for(BenchOp op, size_t bytes, DType dtype, int world_size) {
  const size_t n = static_cast<size_t>(world_size);
  const size_t elem = element_size(dtype);
  size_t count = std::max<size_t>(bytes / elem, 1);
  size_t slot = count;
  if (sized_by_slots(op)) {
    slot = std::max<size_t>(count / n, 1);
    count = slot * n;
  }
  Layout l{.bytes = count * elem, .count = count};
  switch (op) {
    case BenchOp::broadcast:
      l.output_count = count;
      break;
    case BenchOp::all_gather:
    case BenchOp::gather:
      l.input_count = slot;
      l.output_count = count;
      break;
    case BenchOp::reduce_scatter:
    case BenchOp::scatter:
      l.input_count = count;
      l.output_count = slot;
      break;
    default:  // all_reduce, reduce, all_to_all, sendrecv
      l.input_count = count;
      l.output_count = count;
  }
  return l;
}

double busbw_factor(BenchOp op, int world_size) {
  const double n = world_size;
  switch (op) {
    case BenchOp::all_reduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::all_gather:
    case BenchOp::reduce_scatter:
    case BenchOp::all_to_all:
    case BenchOp::gather:
    case BenchOp::scatter:
      return (n - 1) / n;
    case BenchOp::broadcast:
    case BenchOp::reduce:
    case BenchOp::sendrecv:
      return 1.0;
    case BenchOp::pingpong:
      return 2.0;
  }
  return 1.0;
}

void run_op(ProcessGroup& pg, const OpParams& p, BufferView input, BufferView output) {
  WorkPtr work;
  switch (p.op) {
    case BenchOp::all_reduce:
      work = pg.all_reduce(input, output, {.op = p.reduce_op});
      break;
    case BenchOp::broadcast:
      work = pg.broadcast(output, {.root = p.root});
      break;
    case BenchOp::reduce:
      work = pg.reduce(input, output, {.root = p.root, .op = p.reduce_op});
      break;
    case BenchOp::all_gather:
      work = pg.all_gather(input, output);
      break;
    case BenchOp::reduce_scatter:
      work = pg.reduce_scatter(input, output, {.op = p.reduce_op});
      break;
    case BenchOp::all_to_all:
      work = pg.all_to_all(input, output);
      break;
    case BenchOp::gather:
      work = pg.gather(input, output, {.root = p.root});
      break;
    case BenchOp::scatter:
      work = pg.scatter(input, output, {.root = p.root});
      break;
    case BenchOp::sendrecv:
      run_sendrecv(pg, input, output);
      return;
    case BenchOp::pingpong:
      run_pingpong(pg, input, output);
      return;
  }
  work->wait();
}

}  // namespace lockstep::cli::bench
