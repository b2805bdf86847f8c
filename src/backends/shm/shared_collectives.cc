#include "backends/shm/shared_collectives.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <vector>

#include "backends/shm/copy.h"
#include "backends/shm/stream_reduce.h"

namespace lockstep::shm {

namespace {

// Below this many bytes per buffer the usual paths are as fast; skip the look-up.
constexpr size_t kSharedMinBytes = 16 * 1024;
// Elements are reduced (and inputs copied) a block at a time, so that the block is read once from
// memory and written to every output from cache.
constexpr size_t kBlockBytes = 64 * 1024;

std::atomic<uint64_t> shared_ops{0};

enum class Path { none, all_reduce, reduce_scatter, gather_push, gather_pull, broadcast_split };

bool has_shared_path(OpKind kind) {
  return kind == OpKind::all_reduce || kind == OpKind::reduce_scatter ||
         kind == OpKind::all_gather || kind == OpKind::broadcast;
}

size_t total(const std::vector<size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

size_t offset_of(const std::vector<size_t>& counts, int r) {
  return std::accumulate(counts.begin(), counts.begin() + r, size_t{0});
}

// This rank's input and output bytes in op.
struct Extent {
  size_t in = 0, out = 0;
};
Extent extent_of(const Op& op, int me, size_t es) {
  switch (op.kind) {
    case OpKind::reduce_scatter:
      return {total(op.counts) * es, op.counts[static_cast<size_t>(me)] * es};
    case OpKind::all_gather:
      return {op.counts[static_cast<size_t>(me)] * es, total(op.counts) * es};
    default:  // all_reduce, broadcast
      return {op.count * es, op.count * es};
  }
}

const std::byte* bytes_of(const void* p) {
  return static_cast<const std::byte*>(p);
}

// Whether [a, a + n) and [b, b + m) share a byte.
bool overlaps(const void* a, size_t n, const void* b, size_t m) {
  return n > 0 && m > 0 && bytes_of(a) < bytes_of(b) + m && bytes_of(b) < bytes_of(a) + n;
}

std::vector<BufferRefs> published_refs(const Collective& x) {
  std::vector<BufferRefs> refs(static_cast<size_t>(x.n));
  for (int q = 0; q < x.n; ++q) {
    const RankControl& c = x.seg.control(q);
    if (c.has_refs[x.parity]) refs[static_cast<size_t>(q)] = c.refs[x.parity];
  }
  return refs;
}

// The path every rank takes, from the refs every rank published (so all agree).
Path plan(const Collective& x, const std::vector<BufferRefs>& refs) {
  auto every = [&](auto pred) { return std::all_of(refs.begin(), refs.end(), pred); };
  switch (x.op.kind) {
    case OpKind::all_reduce: {
      const size_t bytes = x.op.count * x.es;
      // Rank q's output must be its input, or apart from it: peers write it while others read.
      auto apart = [&](const BufferRefs& r) {
        if (r.in_id != r.out_id || r.in_offset == r.out_offset) return true;
        const uint64_t gap =
            r.in_offset > r.out_offset ? r.in_offset - r.out_offset : r.out_offset - r.in_offset;
        return gap >= bytes;
      };
      return every([&](const BufferRefs& r) { return r.in_id && r.out_id && apart(r); })
                 ? Path::all_reduce
                 : Path::none;
    }
    case OpKind::reduce_scatter:
      return every([](const BufferRefs& r) { return r.in_id != 0; }) ? Path::reduce_scatter
                                                                     : Path::none;
    case OpKind::all_gather:
      if (every([](const BufferRefs& r) { return r.out_id != 0; })) return Path::gather_push;
      if (every([](const BufferRefs& r) { return r.in_id != 0; })) return Path::gather_pull;
      return Path::none;
    case OpKind::broadcast:  // in place: every rank's buffer is its input and its output
      return every([](const BufferRefs& r) { return r.out_id != 0; }) ? Path::broadcast_split
                                                                      : Path::none;
    default:
      return Path::none;
  }
}

// Every rank's buffers as this rank maps them, kept mapped for the op.
struct Resolved {
  std::vector<std::shared_ptr<const AllocationMapping>> pins;
  std::vector<std::byte*> in, out;

  // Rank q's buffer `id` at `offset`, or null when this rank no longer holds the allocation.
  std::byte* resolve(const SharedAllocations& a, int q, uint64_t id, uint64_t offset) {
    auto m = a.pin(id);
    if (!m) return nullptr;
    std::byte* p = m->region(q) + offset;
    pins.push_back(std::move(m));
    return p;
  }
};

// This rank's vote: resolves what the path reads or writes of every rank, and checks that its own
// input and output overlap only as the op allows.
bool resolve(const Collective& x, Path path, const std::vector<BufferRefs>& refs, Resolved& r) {
  const Op& op = x.op;
  const size_t n = static_cast<size_t>(x.n);
  r.in.assign(n, nullptr);
  r.out.assign(n, nullptr);
  const bool need_in =
      path == Path::all_reduce || path == Path::reduce_scatter || path == Path::gather_pull;
  const bool need_out =
      path == Path::all_reduce || path == Path::gather_push || path == Path::broadcast_split;
  for (int q = 0; q < x.n; ++q) {
    const BufferRefs& ref = refs[static_cast<size_t>(q)];
    const size_t i = static_cast<size_t>(q);
    if (need_in && !(r.in[i] = r.resolve(*x.allocations, q, ref.in_id, ref.in_offset)))
      return false;
    if (need_out && !(r.out[i] = r.resolve(*x.allocations, q, ref.out_id, ref.out_offset)))
      return false;
  }
  const Extent e = extent_of(op, x.me, x.es);
  switch (path) {
    case Path::reduce_scatter: {
      // In place: the output is this rank's own part of its input (only it reads that part).
      const auto* own = bytes_of(op.input) + offset_of(op.counts, x.me) * x.es;
      return !overlaps(op.output, e.out, op.input, e.in) || op.output == own;
    }
    case Path::gather_push:
    case Path::gather_pull: {
      // In place: the input is this rank's own slot of its output.
      const auto* slot = bytes_of(op.output) + offset_of(op.counts, x.me) * x.es;
      return !overlaps(op.input, e.in, op.output, e.out) || op.input == slot;
    }
    default:
      return true;
  }
}

void copy_to(bool streaming, std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst != src && bytes > 0) copy_out(streaming, dst, src, bytes);
}

// Reduces one block of srcs into dsts[0] and copies it to the other dsts. Outputs of streaming
// size get the fused kernel (stream_reduce.h) where it applies. Otherwise the Reducer writes
// dsts[0] directly when it may (`direct`: dsts[0] is no source but srcs[0]), else scratch.
void reduce_block(Collective& x, const void* const* srcs, void* const* dsts, int ndst, size_t len,
                  bool streaming, bool direct, std::vector<std::byte>& scratch) {
  const Op& op = x.op;
  if (streaming && stream_reduce(dsts, ndst, srcs, x.n, len, op.dtype, op.reduce_op)) return;
  const size_t bytes = len * x.es;
  if (!direct) scratch.resize(std::max(scratch.size(), bytes));
  void* result = direct ? dsts[0] : scratch.data();
  x.reducer.reduce(result, srcs, x.n, len, op.dtype, op.reduce_op);
  for (int d = direct ? 1 : 0; d < ndst; ++d) copy_out(streaming, dsts[d], result, bytes);
}

// Rank me reduces its slice of every input and writes it into every output (see the top).
void all_reduce_shared(Collective& x, const Resolved& r) {
  const Op& op = x.op;
  const size_t es = x.es, per = kBlockBytes / es, n = static_cast<size_t>(x.n);
  const size_t me = static_cast<size_t>(x.me);
  const Range s = slice_of(op.count, x.me, x.n, es);
  const bool streaming = op.count * es >= kStreamOutputBytes;
  const bool direct = r.out[me] != r.in[me] || x.me == 0;
  std::vector<std::byte> scratch;
  std::vector<const void*> srcs(n);
  std::vector<void*> dsts(n);
  for (size_t b = s.begin; b < s.end; b += per) {
    const size_t len = std::min(per, s.end - b);
    for (size_t q = 0; q < n; ++q) {
      srcs[q] = r.in[q] + b * es;
      dsts[q] = r.out[(me + q) % n] + b * es;  // this rank's own output first
    }
    reduce_block(x, srcs.data(), dsts.data(), x.n, len, streaming, direct, scratch);
  }
}

void reduce_scatter_shared(Collective& x, const Resolved& r) {
  const Op& op = x.op;
  const size_t es = x.es, per = kBlockBytes / es;
  const size_t count = op.counts[static_cast<size_t>(x.me)], at = offset_of(op.counts, x.me);
  const bool streaming = count * es >= kStreamOutputBytes;
  auto* out = static_cast<std::byte*>(op.output);
  // The output may be this rank's own part of its input (srcs[me]).
  const bool direct = !overlaps(out, count * es, op.input, total(op.counts) * es) || x.me == 0;
  std::vector<std::byte> scratch;
  std::vector<const void*> srcs(static_cast<size_t>(x.n));
  for (size_t b = 0; b < count; b += per) {
    const size_t len = std::min(per, count - b);
    for (size_t q = 0; q < srcs.size(); ++q) srcs[q] = r.in[q] + (at + b) * es;
    void* dst = out + b * es;
    reduce_block(x, srcs.data(), &dst, 1, len, streaming, direct, scratch);
  }
}

void gather_push(Collective& x, const Resolved& r) {
  const Op& op = x.op;
  const size_t es = x.es, per = kBlockBytes / es;
  const size_t count = op.counts[static_cast<size_t>(x.me)], at = offset_of(op.counts, x.me);
  const bool streaming = total(op.counts) * es >= kStreamOutputBytes;
  const auto* in = bytes_of(op.input);
  for (size_t b = 0; b < count; b += per) {
    const size_t len = std::min(per, count - b);
    for (int k = 0; k < x.n; ++k)
      copy_to(streaming, r.out[static_cast<size_t>((x.me + k) % x.n)] + (at + b) * es, in + b * es,
              len * es);
  }
}

void gather_pull(Collective& x, const Resolved& r) {
  const Op& op = x.op;
  const bool streaming = total(op.counts) * x.es >= kStreamOutputBytes;
  auto* out = static_cast<std::byte*>(op.output);
  for (int k = 0; k < x.n; ++k) {
    const int q = (x.me + k) % x.n;
    const std::byte* src = q == x.me ? bytes_of(op.input) : r.in[static_cast<size_t>(q)];
    copy_to(streaming, out + offset_of(op.counts, q) * x.es, src,
            op.counts[static_cast<size_t>(q)] * x.es);
  }
}

// Rank me copies slice me of the root's buffer into every other rank's buffer.
void broadcast_split(Collective& x, const Resolved& r) {
  const Op& op = x.op;
  const size_t bytes = op.count * x.es;
  const Range s = slice_of(bytes, x.me, x.n, 1);
  const std::byte* from = r.out[static_cast<size_t>(op.root)];
  for (int k = 0; k < x.n; ++k) {
    const int q = (x.me + k) % x.n;
    if (q != op.root)
      copy_to(bytes >= kStreamOutputBytes, r.out[static_cast<size_t>(q)] + s.begin, from + s.begin,
              s.size());
  }
}

}  // namespace

void publish_refs(Collective& x) {
  RankControl& mine = x.seg.control(x.me);
  BufferRefs refs;
  if (has_shared_path(x.op.kind) && x.allocations && x.allocations->any()) {
    const Extent e = extent_of(x.op, x.me, x.es);
    if (std::max(e.in, e.out) >= kSharedMinBytes) {
      if (x.op.input && e.in > 0) {
        const AllocationRef a = x.allocations->find(x.op.input, e.in);
        refs.in_id = a.id;
        refs.in_offset = a.offset;
      }
      if (x.op.output && e.out > 0) {
        const AllocationRef a = x.allocations->find(x.op.output, e.out);
        refs.out_id = a.id;
        refs.out_offset = a.offset;
      }
    }
  }
  const bool any = refs.in_id != 0 || refs.out_id != 0;
  if (any) mine.refs[x.parity] = refs;
  mine.has_refs[x.parity] = any ? 1 : 0;
}

bool run_shared(Collective& x) {
  if (!has_shared_path(x.op.kind) || !x.allocations) return false;
  const std::vector<BufferRefs> refs = published_refs(x);
  const Path path = plan(x, refs);
  if (path == Path::none) return false;
  // The vote (see the top).
  Resolved r;
  RankControl& mine = x.seg.control(x.me);
  mine.shared_ok[x.parity] = resolve(x, path, refs, r) ? 1 : 0;
  x.sync.bump();
  x.base += 1;  // the usual paths count their steps from here
  x.sync.wait_all(x.arrived(), x.op);
  for (int q = 0; q < x.n; ++q)
    if (!x.seg.control(q).shared_ok[x.parity]) return false;
  switch (path) {
    case Path::all_reduce:
      all_reduce_shared(x, r);
      break;
    case Path::reduce_scatter:
      reduce_scatter_shared(x, r);
      break;
    case Path::gather_push:
      gather_push(x, r);
      break;
    case Path::gather_pull:
      gather_pull(x, r);
      break;
    case Path::broadcast_split:
      broadcast_split(x, r);
      break;
    case Path::none:
      break;
  }
  x.sync.bump();  // done: every write of this rank has landed
  x.sync.wait_all(x.base + 2, x.op);
  shared_ops.fetch_add(1, std::memory_order_relaxed);
  return true;
}

uint64_t shared_path_ops() {
  return shared_ops.load(std::memory_order_relaxed);
}

}  // namespace lockstep::shm
