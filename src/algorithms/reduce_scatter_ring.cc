// Ring reduce_scatter (reduce_scatter and reduce_scatter_v).
//
// The reduce-scatter pass of the ring all_reduce (see ring.h and all_reduce_ring.cc), with the
// chunks cut by the counts array and the ring started one chunk earlier so that rank r ends
// owning chunk r: at step s (0..n-2) rank r sends chunk r-1-s and receives chunk r-2-s, reduces
// it with its own input and passes it on. Partial sums of other ranks' chunks live in scratch;
// the owned chunk is reduced straight into the output. Each rank sends and receives (n-1)/n of
// the input, the minimum. The input is never written.
#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void reduce_scatter_ring(Transport& t, Scratch& scratch, const Op& op, int average_divisor) {
  const int me = t.rank();
  RingLayout layout = counts_layout(op.counts, op.dtype);
  size_t total = 0;
  for (const ByteRange& c : layout.chunks) total += c.bytes;
  auto* work = static_cast<char*>(scratch.get(Scratch::kWork, total));
  auto* out = static_cast<char*>(op.output);
  ring_reduce_scatter(
      t, scratch,
      {.layout = layout,
       .input = static_cast<const char*>(op.input),
       .dest =
           [&](int chunk) {
             return chunk == me ? out : work + layout.chunks[static_cast<size_t>(chunk)].offset;
           },
       .first_chunk = me - 1,
       .dtype = op.dtype,
       .op = op.reduce_op,
       .average_divisor = average_divisor});
}

}  // namespace lockstep
