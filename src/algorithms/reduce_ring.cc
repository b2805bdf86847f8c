// Reduce as a ring reduce-scatter followed by a gather to the root (bandwidth-optimal; the choice
// for large buffers).
//
// The reduce-scatter pass of the ring all_reduce (see all_reduce_ring.cc), arranged so that rank
// r ends owning chunk r, leaves every chunk reduced on one rank after each rank has sent and
// received (n-1)/n of the buffer. Every rank but the root then sends its chunk to the root, which
// receives each straight into its output. Compared with the tree, no rank receives or reduces
// the whole buffer more than once, so large reduces run at link speed instead of
// log2(n) * size / bandwidth.
#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void reduce_ring(Transport& t, Scratch& scratch, const Op& op) {
  const int n = t.size(), me = t.rank();
  RingLayout layout = even_layout(op.count, op.dtype, n);
  const bool root = me == op.root;
  auto* base =
      root ? static_cast<char*>(op.output)
           : static_cast<char*>(scratch.get(Scratch::kWork, op.count * element_size(op.dtype)));
  ring_reduce_scatter(
      t, scratch,
      {.layout = layout,
       .input = static_cast<const char*>(op.input),
       .dest = [&](int chunk) { return base + layout.chunks[static_cast<size_t>(chunk)].offset; },
       .first_chunk = me - 1,
       .dtype = op.dtype,
       .op = op.reduce_op});
  const ByteRange own = layout.chunks[static_cast<size_t>(me)];
  if (!root) {
    t.wait(t.post_send(op.root, base + own.offset, own.bytes));
    return;
  }
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const ByteRange c = layout.chunks[static_cast<size_t>(r)];
    t.post_recv(r, base + c.offset, c.bytes);
  }
  t.wait_all();
}

}  // namespace lockstep
