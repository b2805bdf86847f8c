// Direct scatter (scatter and scatter_v).
//
// The root sends slot r of its input to every rank r as one message (all sends posted at once,
// progressing together) and copies its own slot; every other rank receives its slot straight into
// its output. Empty slots still travel as one empty message.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void scatter_direct(Transport& t, const Op& op) {
  const int n = t.size(), me = t.rank();
  const size_t es = element_size(op.dtype);
  if (me != op.root) {
    t.wait(t.post_recv(op.root, op.output, op.counts[static_cast<size_t>(me)] * es));
    return;
  }
  RingLayout layout = counts_layout(op.counts, op.dtype);
  const auto* in = static_cast<const char*>(op.input);
  for (int r = 0; r < n; ++r) {
    const ByteRange slot = layout.chunks[static_cast<size_t>(r)];
    if (r != me) t.post_send(r, in + slot.offset, slot.bytes);
  }
  const ByteRange own = layout.chunks[static_cast<size_t>(me)];
  if (op.output != in + own.offset) std::memmove(op.output, in + own.offset, own.bytes);
  t.wait_all();
}

}  // namespace lockstep
