// Pairwise-exchange all_to_all (all_to_all and all_to_all_v).
//
// Rank i's input slot j (counts[j] elements) goes to rank j's output slot i (recv_counts[i]
// elements there). Every rank posts all its receives, then all its sends, in the order
// i+1, i+2, ... (mod n) so that the pairs start staggered, and waits for all of them: every
// link works at once and each byte crosses the network once. The rank's own slot is copied
// locally. Every pair exchanges one message per direction even when it is empty, so a pair that
// disagrees about its counts fails with a MismatchError naming both sizes.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void all_to_all_pairwise(Transport& t, Scratch& scratch, const Op& op) {
  const int n = t.size(), me = t.rank();
  RingLayout send_layout = counts_layout(op.counts, op.dtype);
  RingLayout recv_layout = counts_layout(op.recv_counts, op.dtype);
  const auto* in = static_cast<const char*>(op.input);
  auto* out = static_cast<char*>(op.output);
  if (static_cast<const void*>(in) == static_cast<void*>(out)) {  // in place: send from a copy
    const ByteRange last = send_layout.chunks.back();
    auto* copy = static_cast<char*>(scratch.get(Scratch::kCopy, last.offset + last.bytes));
    std::memcpy(copy, in, last.offset + last.bytes);
    in = copy;
  }
  for (int k = 1; k < n; ++k) {
    const int from = ring_mod(me - k, n);
    const ByteRange slot = recv_layout.chunks[static_cast<size_t>(from)];
    t.post_recv(from, out + slot.offset, slot.bytes);
  }
  for (int k = 1; k < n; ++k) {
    const int to = ring_mod(me + k, n);
    const ByteRange slot = send_layout.chunks[static_cast<size_t>(to)];
    t.post_send(to, in + slot.offset, slot.bytes);
  }
  const ByteRange src = send_layout.chunks[static_cast<size_t>(me)];
  const ByteRange dst = recv_layout.chunks[static_cast<size_t>(me)];
  std::memmove(out + dst.offset, in + src.offset, std::min(src.bytes, dst.bytes));
  t.wait_all();
}

}  // namespace lockstep
