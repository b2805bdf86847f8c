// broadcast, all_gather(_v), gather(_v), scatter(_v) and all_to_all(_v) over shared memory.
//
// Small data: the ranks that hold data copy it into their small slot and arrive; the others copy
// what they need straight out of those slots. Large data: pipelined rounds over the chunk buffers
// (collective.h). A rank whose data goes to several ranks (scatter's root, all_to_all) splits its
// chunk buffer into n regions, one per destination, and each round moves one region-sized part of
// every destination's data.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/shm/collective.h"
#include "backends/shm/copy.h"
#include "backends/shm/shared_collectives.h"

namespace lockstep::shm {

namespace {

const std::byte* bytes_of(const void* p) {
  return static_cast<const std::byte*>(p);
}
std::byte* bytes_of(void* p) {
  return static_cast<std::byte*>(p);
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

// Into a large output (see kStreamOutputBytes): non-temporal stores.
void copy_out_bytes(bool streaming, void* dst, const void* src, size_t bytes) {
  if (dst != src) copy_out(streaming, dst, src, bytes);
}

bool streams(size_t output_bytes) {
  return output_bytes >= kStreamOutputBytes;
}

std::vector<size_t> offsets_of(const std::vector<size_t>& counts) {
  std::vector<size_t> offset(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offset.begin() + 1);
  return offset;
}

size_t largest(const std::vector<size_t>& counts) {
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

// The largest count any rank sends to any rank in this all_to_all (from the published counts).
size_t largest_send(const Collective& x) {
  size_t most = 0;
  for (int i = 0; i < x.n; ++i) {
    const uint64_t* theirs = x.seg.counts(i, x.parity);
    most = std::max<size_t>(most, *std::max_element(theirs, theirs + x.n));
  }
  return most;
}

}  // namespace

void run_broadcast(Collective& x) {
  const Op& op = x.op;
  const size_t bytes = op.count * x.es;
  const bool root = x.me == op.root;
  const bool fits = bytes <= kSmallSlotBytes;
  if (root && fits) copy_bytes(x.small(x.me), op.input, bytes);
  publish_refs(x);
  if (arrive(x, root ? bytes : 0, !root || fits)) {
    if (!root) copy_bytes(op.output, x.small(op.root), bytes);
    return;
  }
  if (run_shared(x)) return;
  const size_t per_round = x.chunk_bytes();
  auto produce = [&](size_t c) {
    const Range part = part_of(bytes, c, per_round);
    copy_bytes(x.chunk(x.me, c), bytes_of(op.input) + part.begin, part.size());
  };
  const bool streaming = streams(bytes);
  auto consume = [&](size_t c) {
    const Range part = part_of(bytes, c, per_round);
    copy_out_bytes(streaming, bytes_of(op.output) + part.begin, x.chunk(op.root, c), part.size());
  };
  run_rounds(x,
             RoundPlan{.rounds = rounds_for(bytes, per_round),
                       .produces = root,
                       .consumes = !root,
                       .source = op.root},
             produce, consume, [](size_t) {});
}

void run_gather(Collective& x) {
  const Op& op = x.op;
  const size_t es = x.es, me = static_cast<size_t>(x.me);
  const bool everyone = op.kind == OpKind::all_gather, collects = everyone || x.me == op.root;
  const std::vector<size_t> offset = offsets_of(op.counts);
  const size_t mine = op.counts[me] * es;
  // gather's root keeps its own data: it goes straight from its input to its output.
  const bool publishes = everyone || x.me != op.root;
  const bool fits = mine <= kSmallSlotBytes;
  if (publishes && fits) copy_bytes(x.small(x.me), op.input, mine);
  publish_refs(x);
  if (arrive(x, mine, !publishes || fits)) {
    if (!collects) return;
    for (size_t q = 0; q < op.counts.size(); ++q)
      copy_bytes(bytes_of(op.output) + offset[q] * es,
                 q == me ? op.input : x.small(static_cast<int>(q)), op.counts[q] * es);
    return;
  }
  if (run_shared(x)) return;
  const size_t per_round = x.chunk_bytes() / es;
  auto produce = [&](size_t c) {
    const Range part = part_of(op.counts[me], c, per_round);
    copy_bytes(x.chunk(x.me, c), bytes_of(op.input) + part.begin * es, part.size() * es);
  };
  const bool streaming = streams(offset.back() * es);
  auto consume = [&](size_t c) {
    for (size_t q = 0; q < op.counts.size(); ++q) {
      const Range part = part_of(op.counts[q], c, per_round);
      // This rank's own part: from its chunk buffer (in cache) when it has just filled it.
      const void* src = q != me     ? x.chunk(static_cast<int>(q), c)
                        : publishes ? x.chunk(x.me, c)
                                    : bytes_of(op.input) + part.begin * es;
      copy_out_bytes(streaming, bytes_of(op.output) + (offset[q] + part.begin) * es, src,
                     part.size() * es);
    }
  };
  run_rounds(x,
             RoundPlan{.rounds = rounds_for(largest(op.counts), per_round),
                       .produces = publishes,
                       .consumes = collects},
             produce, consume, [](size_t) {});
}

void run_scatter(Collective& x) {
  const Op& op = x.op;
  const size_t es = x.es, me = static_cast<size_t>(x.me);
  const bool root = x.me == op.root;
  const std::vector<size_t> offset = offsets_of(op.counts);
  const size_t total = offset.back() * es;
  const bool fits = total <= kSmallSlotBytes;
  if (root && fits) copy_bytes(x.small(x.me), op.input, total);
  if (arrive(x, root ? total : 0, !root || fits)) {
    const std::byte* from = root ? bytes_of(op.input) : x.small(op.root);
    copy_bytes(op.output, from + offset[me] * es, op.counts[me] * es);
    return;
  }
  if (root) copy_bytes(op.output, bytes_of(op.input) + offset[me] * es, op.counts[me] * es);
  const size_t region = x.region_bytes(), per_round = region / es;
  auto produce = [&](size_t c) {
    for (size_t q = 0; q < op.counts.size(); ++q) {
      if (q == me) continue;
      const Range part = part_of(op.counts[q], c, per_round);
      copy_bytes(x.chunk(x.me, c) + q * region, bytes_of(op.input) + (offset[q] + part.begin) * es,
                 part.size() * es);
    }
  };
  const bool streaming = streams(op.counts[me] * es);
  auto consume = [&](size_t c) {
    const Range part = part_of(op.counts[me], c, per_round);
    copy_out_bytes(streaming, bytes_of(op.output) + part.begin * es,
                   x.chunk(op.root, c) + me * region, part.size() * es);
  };
  run_rounds(x,
             RoundPlan{.rounds = rounds_for(largest(op.counts), per_round),
                       .produces = root,
                       .consumes = !root,
                       .source = op.root},
             produce, consume, [](size_t) {});
}

void run_all_to_all(Collective& x) {
  const Op& op = x.op;
  const size_t es = x.es, me = static_cast<size_t>(x.me), n = static_cast<size_t>(x.n);
  const std::vector<size_t> send_offset = offsets_of(op.counts),
                            recv_offset = offsets_of(op.recv_counts);
  const size_t total = send_offset.back() * es;
  const bool fits = total <= kSmallSlotBytes;
  if (fits) copy_bytes(x.small(x.me), op.input, total);
  const bool all_inline = arrive(x, total, fits);
  auto* out = bytes_of(op.output);
  copy_bytes(out + recv_offset[me] * es, bytes_of(op.input) + send_offset[me] * es,
             op.counts[me] * es);
  if (all_inline) {
    for (size_t i = 0; i < n; ++i) {
      if (i == me) continue;
      const uint64_t* theirs = x.seg.counts(static_cast<int>(i), x.parity);
      const size_t at = std::accumulate(theirs, theirs + me, size_t{0});
      copy_bytes(out + recv_offset[i] * es, x.small(static_cast<int>(i)) + at * es,
                 op.recv_counts[i] * es);
    }
    return;
  }
  const size_t most = largest_send(x);
  const size_t region = x.region_bytes(), per_round = region / es;
  auto produce = [&](size_t c) {
    for (size_t j = 0; j < n; ++j) {
      if (j == me) continue;
      const Range part = part_of(op.counts[j], c, per_round);
      copy_bytes(x.chunk(x.me, c) + j * region,
                 bytes_of(op.input) + (send_offset[j] + part.begin) * es, part.size() * es);
    }
  };
  const bool streaming = streams(recv_offset.back() * es);
  auto consume = [&](size_t c) {
    for (size_t i = 0; i < n; ++i) {
      if (i == me) continue;
      const Range part = part_of(op.recv_counts[i], c, per_round);
      copy_out_bytes(streaming, out + (recv_offset[i] + part.begin) * es,
                     x.chunk(static_cast<int>(i), c) + me * region, part.size() * es);
    }
  };
  run_rounds(x,
             RoundPlan{.rounds = rounds_for(most, per_round), .produces = true, .consumes = true},
             produce, consume, [](size_t) {});
}

}  // namespace lockstep::shm
