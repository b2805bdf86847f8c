// Binomial-tree broadcast (latency-optimal; the choice for small buffers).
//
// Ranks are renumbered relative to the root (v = rank - root mod n), so the root is v = 0. A
// rank v > 0 receives the whole buffer from its parent, v with its lowest set bit cleared, then
// sends it to its children v + 2^i for every 2^i below that lowest bit (largest subtree first).
// The root's children are 1, 2, 4, ...; the data reaches every rank after ceil(log2 n) rounds.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void broadcast_tree(Transport& t, const Op& op) {
  const int n = t.size(), me = t.rank();
  const int v = ring_mod(me - op.root, n);
  const size_t bytes = op.count * element_size(op.dtype);
  auto* out = static_cast<char*>(op.output);
  if (v == 0 && op.input != op.output) std::memcpy(out, op.input, bytes);

  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      t.wait(t.post_recv(ring_mod(v - mask + op.root, n), out, bytes));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) t.post_send(ring_mod(v + mask + op.root, n), out, bytes);
  t.wait_all();
}

}  // namespace lockstep
