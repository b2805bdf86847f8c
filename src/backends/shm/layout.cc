#include "backends/shm/layout.h"

#include <algorithm>

namespace lockstep::shm {

namespace {

constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

size_t chunk_bytes_for(int n) {
  // 512 KiB per rank for up to 8 ranks; larger groups keep the total near 4 MiB per buffer.
  size_t bytes = std::clamp<size_t>(4 * 1024 * 1024 / static_cast<size_t>(std::max(n, 1)),
                                    64 * 1024, 512 * 1024);
  return round_up(bytes, kPage);
}

Layout layout_for(int n) {
  Layout l;
  const size_t ranks = static_cast<size_t>(n);
  l.n = n;
  l.chunk_bytes = chunk_bytes_for(n);
  l.control = round_up(sizeof(SegmentHeader), kPage);
  l.counts = round_up(l.control + sizeof(RankControl) * ranks, kPage);
  l.counts_stride = round_up(sizeof(uint64_t) * ranks, kCacheLine);
  l.small = round_up(l.counts + l.counts_stride * 2 * ranks, kPage);
  l.chunks = l.small + kSmallSlotBytes * 2 * ranks;
  l.total = round_up(l.chunks + l.chunk_bytes * kChunkDepth * ranks, kPage);
  return l;
}

}  // namespace lockstep::shm
