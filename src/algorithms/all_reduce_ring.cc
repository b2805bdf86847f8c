// Ring all_reduce (bandwidth-optimal; the choice for large buffers).
//
// The buffer is cut into one chunk per rank and each chunk into segments. The algorithm is a
// reduce-scatter pass followed by an all-gather pass around the ring r -> r+1:
//
//   reduce-scatter: at step s (0..n-2) rank r sends chunk r-s to r+1 and receives chunk r-s-1
//   from r-1, which it reduces with its own input. After n-1 steps rank r holds chunk r+1 reduced
//   over every rank.
//   all-gather: at step s rank r sends chunk r+1-s and receives chunk r-s, now straight into the
//   output, so that after n-1 more steps every rank holds every reduced chunk.
//
// Each rank sends and receives 2(n-1)/n of the buffer, the minimum for an all_reduce. Segments
// are forwarded as soon as they are reduced (or received), so the passes run as pipelines, and
// the segments of the reduce-scatter arrive in a small window of scratch (kRingRecvWindow
// segments that stay in cache) before being reduced into the output. The reduced chunk's first
// all-gather sends leave as its last reduce-scatter segments complete.
//
// Out of place, the output is written chunk by chunk (reduce_pair of input and the incoming
// partial sum), so it never needs a copy of the input. avg divides each owned segment once,
// before it is sent around.
#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void all_reduce_ring(Transport& t, Scratch& scratch, const Op& op, int average_divisor) {
  const int n = t.size(), me = t.rank();
  RingLayout layout = even_layout(op.count, op.dtype, n);
  auto* out = static_cast<char*>(op.output);
  ring_reduce_scatter(
      t, scratch,
      {.layout = layout,
       .input = static_cast<const char*>(op.input),
       .dest = [&](int chunk) { return out + layout.chunks[static_cast<size_t>(chunk)].offset; },
       .first_chunk = me,
       .dtype = op.dtype,
       .op = op.reduce_op,
       .average_divisor = average_divisor,
       .forward_owned = true});
  ring_all_gather(t, {.layout = layout,
                      .output = out,
                      .owned_chunk = ring_mod(me + 1, n),
                      .owned_already_sent = true});
}

}  // namespace lockstep
