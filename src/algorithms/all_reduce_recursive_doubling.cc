// Recursive doubling all_reduce (latency-optimal; the choice for small buffers).
//
// With p = 2^k ranks: at step i (mask = 2^i) every rank exchanges its whole current buffer with
// the rank whose number differs in bit i, and both reduce what they received into what they
// have. After k steps every rank holds the reduction over all p ranks: log2(p) message rounds
// instead of the ring's 2(n-1).
//
// Other sizes: let p be the largest power of two <= n and rem = n - p. First the lowest 2*rem
// ranks pair up: each even rank of them sends its buffer to the odd rank above it and sits out.
// The p remaining ranks (the odd ones of the pairs, and every rank >= 2*rem) run the doubling
// among themselves, numbered 0..p-1; at the end each odd rank sends the result back to its even
// partner.
//
// Both partners of an exchange reduce the same two buffers in opposite order; sum, prod, min
// and max are commutative, so every rank ends with identical bits.
#include <cstring>

#include "algorithms/algorithms.h"
#include "core/reduce.h"

namespace lockstep {

namespace {

// The real rank of doubling participant v.
int real_rank(int v, int rem) {
  return v < rem ? 2 * v + 1 : v + rem;
}

}  // namespace

void all_reduce_recursive_doubling(Transport& t, Scratch& scratch, const Op& op) {
  const int n = t.size(), me = t.rank();
  const size_t bytes = op.count * element_size(op.dtype);
  auto* out = static_cast<char*>(op.output);
  if (op.input != op.output) std::memcpy(out, op.input, bytes);
  auto* incoming = static_cast<char*>(scratch.get(Scratch::kRecv, bytes));

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  if (me < 2 * rem && me % 2 == 0) {  // folded into me + 1, which sends the result back
    t.wait(t.post_send(me + 1, out, bytes));
    t.wait(t.post_recv(me + 1, out, bytes));
    return;
  }
  if (me < 2 * rem) {
    t.wait(t.post_recv(me - 1, incoming, bytes));
    reduce_into(out, incoming, op.count, op.dtype, op.reduce_op);
  }
  const int v = me < 2 * rem ? me / 2 : me - rem;
  for (int mask = 1; mask < p; mask <<= 1) {
    int partner = real_rank(v ^ mask, rem);
    t.post_send(partner, out, bytes);
    t.post_recv(partner, incoming, bytes);
    t.wait_all();
    reduce_into(out, incoming, op.count, op.dtype, op.reduce_op);
  }
  if (me < 2 * rem) t.wait(t.post_send(me - 1, out, bytes));
}

}  // namespace lockstep
