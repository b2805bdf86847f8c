#include "backends/shm/collective.h"

#include <algorithm>

#include "backends/shm/descriptor.h"

namespace lockstep::shm {

size_t Collective::region_bytes() const {
  return chunk_bytes() / static_cast<size_t>(n) / kCacheLine * kCacheLine;
}

bool arrive(Collective& x, uint64_t payload_bytes, bool inline_data) {
  RankControl& mine = x.seg.control(x.me);
  mine.desc[x.parity] = make_descriptor(x.op, payload_bytes);
  const uint64_t hash = fingerprint(mine.desc[x.parity]);
  mine.fingerprint[x.parity] = hash;
  mine.inline_data[x.parity] = inline_data ? 1 : 0;
  if (x.op.kind == OpKind::all_to_all)
    std::copy(x.op.counts.begin(), x.op.counts.end(), x.seg.counts(x.me, x.parity));
  x.sync.bump();
  x.sync.wait_all(x.arrived(), x.op);
  check_descriptors(x.seg, x.parity, x.op, x.me, hash);
  bool all_inline = inline_data;
  for (int r = 0; r < x.n && all_inline; ++r)
    all_inline = x.seg.control(r).inline_data[x.parity] != 0;
  return all_inline;
}

Range slice_of(size_t len, int q, int n, size_t es) {
  const size_t align = std::max<size_t>(1, kCacheLine / es);
  auto edge = [&](int k) {
    return k >= n ? len : len * static_cast<size_t>(k) / static_cast<size_t>(n) / align * align;
  };
  return Range{edge(q), edge(q + 1)};
}

Range part_of(size_t count, size_t round, size_t per) {
  const size_t begin = std::min(count, round * per);
  return Range{begin, std::min(count, begin + per)};
}

size_t rounds_for(size_t max_count, size_t per) {
  return (max_count + per - 1) / per;
}

}  // namespace lockstep::shm
