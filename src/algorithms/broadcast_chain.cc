// Pipelined chain broadcast (bandwidth-optimal; the choice for large buffers).
//
// Ranks form a chain in order from the root (v = rank - root mod n: 0 -> 1 -> ... -> n-1). The
// buffer is cut into segments of kSegmentBytes. The root sends every segment to v = 1; every
// other rank receives each segment straight into its output and forwards it to v + 1 as soon as
// it has arrived. Once the pipeline is full every link carries data at once, so the time is
// about (size + (n-2) * segment) / bandwidth, against log2(n) * size / bandwidth for the tree.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/ring.h"

namespace lockstep {

void broadcast_chain(Transport& t, const Op& op) {
  const int n = t.size(), me = t.rank();
  const int v = ring_mod(me - op.root, n);
  const size_t bytes = op.count * element_size(op.dtype);
  auto* out = static_cast<char*>(op.output);
  const size_t segments = std::max<size_t>(1, (bytes + kSegmentBytes - 1) / kSegmentBytes);
  auto segment_bytes = [&](size_t j) { return std::min(kSegmentBytes, bytes - j * kSegmentBytes); };
  const int next = ring_mod(me + 1, n), prev = ring_mod(me - 1, n);

  if (v == 0) {
    const auto* in = static_cast<const char*>(op.input);
    for (size_t j = 0; j < segments; ++j)
      t.post_send(next, in + j * kSegmentBytes, bytes ? segment_bytes(j) : 0);
    if (op.input != op.output) std::memcpy(out, op.input, bytes);
    t.wait_all();
    return;
  }
  std::vector<Transport::Request> recvs(segments);
  for (size_t j = 0; j < segments; ++j)
    recvs[j] = t.post_recv(prev, out + j * kSegmentBytes, bytes ? segment_bytes(j) : 0);
  for (size_t j = 0; j < segments; ++j) {
    t.wait(recvs[j]);
    if (v + 1 < n) t.post_send(next, out + j * kSegmentBytes, bytes ? segment_bytes(j) : 0);
  }
  t.wait_all();
}

}  // namespace lockstep
