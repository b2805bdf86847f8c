#include "backends/shm/descriptor.h"

#include "core/fnv1a.h"
#include "lockstep/core/error.h"

namespace lockstep::shm {

Descriptor make_descriptor(const Op& op, uint64_t payload_bytes) {
  Descriptor d;
  d.header = data_header(op, 0);
  d.payload_bytes = payload_bytes;
  return d;
}

uint64_t fingerprint(const Descriptor& d) {
  return fnv1a(&d.header, sizeof(MessageHeader));  // it has no padding: a wire format
}

void check_descriptors(const SegmentView& segment, int parity, const Op& op, int rank,
                       uint64_t mine) {
  const size_t es = element_size(op.dtype);
  for (int peer = 0; peer < segment.size(); ++peer) {
    if (peer == rank) continue;
    const RankControl& c = segment.control(peer);
    MessageHeader got = c.desc[parity].header;
    const HeaderCheck check{.op = op, .rank = rank, .peer = peer};
    if (c.fingerprint[parity] != mine)
      if (auto m = header_mismatch(got, 0, check)) throw MismatchError(*m);
    if (op.kind != OpKind::all_to_all) continue;
    // The pair's sizes: what peer sends here against what this rank expects from it.
    got.payload_bytes = segment.counts(peer, parity)[rank] * es;
    if (auto m = header_mismatch(got, op.recv_counts[static_cast<size_t>(peer)] * es, check))
      throw MismatchError(*m);
  }
}

}  // namespace lockstep::shm
