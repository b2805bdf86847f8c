// Dissemination barrier.
//
// In round k (distance d = 2^k) rank r sends an empty message to r+d and waits for one from
// r-d (mod n). After ceil(log2 n) rounds every rank has heard, directly or through others, from
// every rank, so none can leave before all have entered. Works for any n, with one message per
// rank per round.
#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void barrier_dissemination(Transport& t, const Op&) {
  const int n = t.size(), me = t.rank();
  for (int d = 1; d < n; d <<= 1) {
    t.post_send(ring_mod(me + d, n), nullptr, 0);
    t.post_recv(ring_mod(me - d, n), nullptr, 0);
    t.wait_all();
  }
}

}  // namespace lockstep
