// all_reduce, reduce and reduce_scatter over shared memory.
//
// Small data (one sync): every rank copies its input into its small slot and arrives; then every
// rank that needs the result reduces all slots, in rank order, into its output.
//
// Large data (pipelined rounds): the message is cut into chunks of chunk_bytes, and each chunk
// into n slices, one per rank. In round c every rank copies chunk c of its input into its chunk
// buffer, except its own slice (produce); reduces its own slice across all ranks (its own input
// directly, the others' chunk buffers), writing the result into its own slice of its chunk buffer
// and into its output (consume); then, after every rank has done so, copies the other slices'
// results out (finish). Each rank reads its input once and writes its output once, and the chunk
// buffers stay in cache between the write and the peers' reads.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/shm/collective.h"
#include "backends/shm/copy.h"
#include "backends/shm/shared_collectives.h"
#include "backends/shm/stream_reduce.h"

namespace lockstep::shm {

namespace {

// Up to this size, every rank reducing every slot beats the pipeline's two extra syncs.
constexpr size_t kSmallReduceBytes = 16 * 1024;

const std::byte* bytes_of(const void* p) {
  return static_cast<const std::byte*>(p);
}
std::byte* bytes_of(void* p) {
  return static_cast<std::byte*>(p);
}

// Whether [a, a + n) and [b, b + m) share a byte.
bool overlaps(const void* a, size_t n, const void* b, size_t m) {
  return n > 0 && m > 0 && bytes_of(a) < bytes_of(b) + m && bytes_of(b) < bytes_of(a) + n;
}

void all_reduce_pipelined(Collective& x, bool deliver);

void reduce_small(Collective& x, void* out, size_t offset_elems, size_t count) {
  const void** srcs = x.reducer.sources(x.n);
  for (int q = 0; q < x.n; ++q) srcs[q] = x.small(q) + offset_elems * x.es;
  x.reducer.reduce(out, srcs, x.n, count, x.op.dtype, x.op.reduce_op);
}

}  // namespace

void run_all_reduce(Collective& x) {
  const Op& op = x.op;
  const size_t es = x.es, bytes = op.count * es;
  const bool deliver = op.kind == OpKind::all_reduce || x.me == op.root;
  const bool fits = bytes <= kSmallReduceBytes;
  if (fits && bytes > 0) std::memcpy(x.small(x.me), op.input, bytes);
  publish_refs(x);
  if (arrive(x, bytes, fits)) {
    if (deliver) reduce_small(x, op.output, 0, op.count);
    return;
  }
  if (run_shared(x)) return;
  all_reduce_pipelined(x, deliver);
}

namespace {

// The large-data path of all_reduce and reduce (see the top of this file).
void all_reduce_pipelined(Collective& x, bool deliver) {
  const Op& op = x.op;
  const size_t es = x.es, bytes = op.count * es;
  const size_t per_round = x.chunk_bytes() / es;
  const auto* in = bytes_of(op.input);
  auto* out = bytes_of(op.output);
  const bool streaming = bytes >= kStreamOutputBytes;
  std::vector<const void*> srcs(static_cast<size_t>(x.n));
  auto produce = [&](size_t c) {
    const Range part = part_of(op.count, c, per_round), mine = slice_of(part.size(), x.me, x.n, es);
    std::memcpy(x.chunk(x.me, c), in + part.begin * es, mine.begin * es);
    std::memcpy(x.chunk(x.me, c) + mine.end * es, in + (part.begin + mine.end) * es,
                (part.size() - mine.end) * es);
  };
  auto consume = [&](size_t c) {
    const Range part = part_of(op.count, c, per_round), mine = slice_of(part.size(), x.me, x.n, es);
    for (int q = 0; q < x.n; ++q)
      srcs[static_cast<size_t>(q)] =
          q == x.me ? in + (part.begin + mine.begin) * es : x.chunk(q, c) + mine.begin * es;
    std::byte* result = x.chunk(x.me, c) + mine.begin * es;
    std::byte* to = out + (part.begin + mine.begin) * es;
    // One pass where it applies: the result into the chunk buffer and, streamed, the output.
    if (deliver && streaming &&
        stream_reduce_keep(result, to, srcs.data(), x.n, mine.size(), op.dtype, op.reduce_op))
      return;
    x.reducer.reduce(result, srcs.data(), x.n, mine.size(), op.dtype, op.reduce_op);
    if (deliver) copy_out(streaming, to, result, mine.size() * es);
  };
  auto finish = [&](size_t c) {
    const Range part = part_of(op.count, c, per_round);
    for (int q = 0; q < x.n; ++q) {
      if (q == x.me) continue;
      const Range s = slice_of(part.size(), q, x.n, es);
      copy_out(streaming, out + (part.begin + s.begin) * es, x.chunk(q, c) + s.begin * es,
               s.size() * es);
    }
  };
  run_rounds(x,
             RoundPlan{.rounds = rounds_for(op.count, per_round),
                       .produces = true,
                       .consumes = true,
                       .finishes = deliver},
             produce, consume, finish);
}

}  // namespace

void run_reduce_scatter(Collective& x) {
  const Op& op = x.op;
  const size_t es = x.es, me = static_cast<size_t>(x.me);
  std::vector<size_t> offset(op.counts.size() + 1, 0);
  std::partial_sum(op.counts.begin(), op.counts.end(), offset.begin() + 1);
  const size_t total_bytes = offset.back() * es;
  // Each rank reduces only its own part of the slots: about total_bytes of reading in all.
  const bool fits =
      total_bytes <= std::min(kSmallSlotBytes, kSmallReduceBytes * static_cast<size_t>(x.n));
  if (fits && total_bytes > 0) std::memcpy(x.small(x.me), op.input, total_bytes);
  publish_refs(x);
  if (arrive(x, total_bytes, fits)) {
    reduce_small(x, op.output, offset[me], op.counts[me]);
    return;
  }
  if (run_shared(x)) return;
  const size_t region = x.region_bytes(), per_round = region / es;
  const auto* in = bytes_of(op.input);
  // An output inside this rank's own input region is written while being read: copy it too.
  const bool copy_own =
      overlaps(op.output, op.counts[me] * es, in + offset[me] * es, op.counts[me] * es);
  // A large output is written with non-temporal stores (the fused sum, stream_reduce.h).
  const bool streaming = op.counts[me] * es >= kStreamOutputBytes;
  std::vector<const void*> srcs(static_cast<size_t>(x.n));
  auto produce = [&](size_t c) {
    for (size_t q = 0; q < op.counts.size(); ++q) {
      if (q == me && !copy_own) continue;
      const Range part = part_of(op.counts[q], c, per_round);
      std::memcpy(x.chunk(x.me, c) + q * region, in + (offset[q] + part.begin) * es,
                  part.size() * es);
    }
  };
  auto consume = [&](size_t c) {
    const Range part = part_of(op.counts[me], c, per_round);
    for (int q = 0; q < x.n; ++q)
      srcs[static_cast<size_t>(q)] = q == x.me && !copy_own ? in + (offset[me] + part.begin) * es
                                                            : x.chunk(q, c) + me * region;
    void* to = bytes_of(op.output) + part.begin * es;
    if (streaming && stream_reduce(&to, 1, srcs.data(), x.n, part.size(), op.dtype, op.reduce_op))
      return;
    x.reducer.reduce(to, srcs.data(), x.n, part.size(), op.dtype, op.reduce_op);
  };
  const size_t largest = *std::max_element(op.counts.begin(), op.counts.end());
  run_rounds(
      x, RoundPlan{.rounds = rounds_for(largest, per_round), .produces = true, .consumes = true},
      produce, consume, [](size_t) {});
}

}  // namespace lockstep::shm
