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

size_t mailbox_bytes_for(int n) {
  size_t pairs = static_cast<size_t>(n) * static_cast<size_t>(n);
  return round_up(
      std::clamp<size_t>(4 * 1024 * 1024 / std::max<size_t>(pairs, 1), 4 * 1024, 256 * 1024),
      kPage);
}

Layout layout_for(int n) {
  Layout l;
  const size_t ranks = static_cast<size_t>(n);
  l.n = n;
  l.chunk_bytes = chunk_bytes_for(n);
  l.mailbox_bytes = mailbox_bytes_for(n);
  l.control = round_up(sizeof(SegmentHeader), kPage);
  l.counts = round_up(l.control + sizeof(RankControl) * ranks, kPage);
  l.counts_stride = round_up(sizeof(uint64_t) * ranks, kCacheLine);
  l.small = round_up(l.counts + l.counts_stride * 2 * ranks, kPage);
  l.chunks = l.small + kSmallSlotBytes * 2 * ranks;
  l.mail_control = l.chunks + l.chunk_bytes * kChunkDepth * ranks;
  l.mail_data = round_up(l.mail_control + sizeof(MailboxControl) * ranks * ranks, kPage);
  l.mail_stride = sizeof(ChunkHeader) + l.mailbox_bytes;
  l.total = round_up(l.mail_data + l.mail_stride * kMailboxDepth * ranks * ranks, kPage);
  return l;
}

}  // namespace lockstep::shm
