#include "backends/shm/descriptor.h"

#include "lockstep/core/error.h"

namespace lockstep::shm {

Descriptor make_descriptor(const Op& op, uint64_t payload_bytes, bool inline_data) {
  Descriptor d;
  d.header = data_header(op, 0);
  d.payload_bytes = payload_bytes;
  d.inline_data = inline_data ? 1 : 0;
  return d;
}

void check_descriptors(const SegmentView& segment, int parity, const Op& op, int rank) {
  const size_t es = element_size(op.dtype);
  for (int peer = 0; peer < segment.size(); ++peer) {
    if (peer == rank) continue;
    MessageHeader got = segment.control(peer).desc[parity].header;
    const HeaderCheck check{.op = op, .rank = rank, .peer = peer};
    if (auto m = header_mismatch(got, 0, check)) throw MismatchError(*m);
    if (op.kind != OpKind::all_to_all) continue;
    // The pair's sizes: what peer sends here against what this rank expects from it.
    got.payload_bytes = segment.counts(peer, parity)[rank] * es;
    if (auto m = header_mismatch(got, op.recv_counts[static_cast<size_t>(peer)] * es, check))
      throw MismatchError(*m);
  }
}

}  // namespace lockstep::shm
