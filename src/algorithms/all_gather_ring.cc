// Ring all_gather (all_gather and all_gather_v).
//
// Output slot r belongs to rank r (counts[r] elements). Each rank first puts its input into its
// own slot (nothing to do when the input already is that slot), then runs the all-gather pass of
// the ring (ring.h): at step s (0..n-2) rank r sends slot r-s to r+1 and receives slot r-s-1
// from r-1 straight into the output, forwarding each segment as soon as it arrives. Each rank
// sends and receives every slot but its own once, the minimum. Empty slots still travel as one
// empty message, so ranks with uneven or zero counts post the same messages.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void all_gather_ring(Transport& t, const Op& op) {
  const int me = t.rank();
  RingLayout layout = counts_layout(op.counts, op.dtype);
  auto* out = static_cast<char*>(op.output);
  const ByteRange own = layout.chunks[static_cast<size_t>(me)];
  if (op.input != out + own.offset) std::memmove(out + own.offset, op.input, own.bytes);
  ring_all_gather(t, {.layout = layout, .output = out, .owned_chunk = me});
}

}  // namespace lockstep
