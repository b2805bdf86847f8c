// Direct gather (gather and gather_v).
//
// Every rank but the root sends its input to the root as one message; the root posts one
// receive per rank, straight into that rank's slot of its output, and they all progress at once.
// The root's link carries (n-1)/n of the output, which no algorithm can avoid, and nothing is
// copied twice. Empty inputs still send one empty message, so counts mismatches are caught.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void gather_direct(Transport& t, const Op& op) {
  const int n = t.size(), me = t.rank();
  const size_t es = element_size(op.dtype);
  if (me != op.root) {
    t.wait(t.post_send(op.root, op.input, op.counts[static_cast<size_t>(me)] * es));
    return;
  }
  RingLayout layout = counts_layout(op.counts, op.dtype);
  auto* out = static_cast<char*>(op.output);
  for (int r = 0; r < n; ++r) {
    const ByteRange slot = layout.chunks[static_cast<size_t>(r)];
    if (r != me)
      t.post_recv(r, out + slot.offset, slot.bytes);
    else if (op.input != out + slot.offset)
      std::memmove(out + slot.offset, op.input, slot.bytes);
  }
  t.wait_all();
}

}  // namespace lockstep
