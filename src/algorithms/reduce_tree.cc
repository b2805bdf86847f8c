// Binomial-tree reduce (latency-optimal; the choice for small buffers).
//
// The mirror image of the binomial broadcast. Ranks are renumbered relative to the root
// (v = rank - root mod n). At round i (mask = 2^i) a rank whose bit i is set sends its partial
// result to v - mask and is done; the others receive from v + mask (when it exists) and reduce
// it into their partial result. After ceil(log2 n) rounds the root holds the reduction of every
// rank. Non-root ranks accumulate in scratch: their output buffers are never touched.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"
#include "core/reduce.h"

namespace lockstep {

void reduce_tree(Transport& t, Scratch& scratch, const Op& op) {
  const int n = t.size(), me = t.rank();
  const int v = ring_mod(me - op.root, n);
  const size_t bytes = op.count * element_size(op.dtype);
  auto* acc = v == 0 ? static_cast<char*>(op.output)
                     : static_cast<char*>(scratch.get(Scratch::kWork, bytes));
  if (acc != op.input) std::memcpy(acc, op.input, bytes);
  auto* incoming = static_cast<char*>(scratch.get(Scratch::kRecv, bytes));

  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      t.wait(t.post_send(ring_mod(v - mask + op.root, n), acc, bytes));
      return;
    }
    if (v + mask < n) {
      t.wait(t.post_recv(ring_mod(v + mask + op.root, n), incoming, bytes));
      reduce_into(acc, incoming, op.count, op.dtype, op.reduce_op);
    }
  }
}

}  // namespace lockstep
