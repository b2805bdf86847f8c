#include "algorithms/ring.h"

#include <algorithm>

#include "core/reduce.h"

namespace lockstep {

size_t RingLayout::segments(int chunk) const {
  size_t bytes = chunks[static_cast<size_t>(chunk)].bytes;
  return std::max<size_t>(1, (bytes + segment_bytes - 1) / segment_bytes);
}

ByteRange RingLayout::segment(int chunk, size_t j) const {
  const ByteRange& c = chunks[static_cast<size_t>(chunk)];
  size_t begin = std::min(c.bytes, j * segment_bytes);
  size_t end = std::min(c.bytes, begin + segment_bytes);
  return {c.offset + begin, end - begin};
}

RingLayout even_layout(size_t count, DType dtype, int n) {
  RingLayout layout;
  const size_t es = element_size(dtype);
  const size_t base = count / static_cast<size_t>(n), extra = count % static_cast<size_t>(n);
  size_t offset = 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    size_t bytes = (base + (i < extra ? 1 : 0)) * es;
    layout.chunks.push_back({offset, bytes});
    offset += bytes;
  }
  return layout;
}

RingLayout counts_layout(const std::vector<size_t>& counts, DType dtype) {
  RingLayout layout;
  size_t offset = 0;
  for (size_t c : counts) {
    layout.chunks.push_back({offset, c * element_size(dtype)});
    offset += c * element_size(dtype);
  }
  return layout;
}

namespace {

struct Step {
  int chunk;
  ByteRange segment;
  bool last;  // the last step of the pass
};

// The segments this rank receives during a pass whose step s receives chunk first - s.
std::vector<Step> pass_steps(const RingLayout& layout, int first) {
  const int n = layout.size();
  std::vector<Step> steps;
  for (int s = 0; s < n - 1; ++s) {
    int c = ring_mod(first - s, n);
    for (size_t j = 0; j < layout.segments(c); ++j)
      steps.push_back({c, layout.segment(c, j), s == n - 2});
  }
  return steps;
}

void send_chunk(Transport& t, int peer, const RingLayout& layout, int chunk, const char* base) {
  for (size_t j = 0; j < layout.segments(chunk); ++j) {
    ByteRange seg = layout.segment(chunk, j);
    t.post_send(peer, base + seg.offset, seg.bytes);
  }
}

}  // namespace

void ring_reduce_scatter(Transport& t, Scratch& scratch, const RingReduceScatter& a) {
  const int n = t.size(), next = ring_mod(t.rank() + 1, n), prev = ring_mod(t.rank() - 1, n);
  const RingLayout& layout = a.layout;
  const size_t es = element_size(a.dtype);
  const int first = ring_mod(a.first_chunk, n);
  const size_t first_segments = layout.segments(first);
  struct Held {
    const char* data;
    size_t bytes;
  };
  size_t first_sent = 0;
  std::vector<Held> held;  // forwards wait until the first chunk is posted (message order)
  // The first chunk's segments: kRingSendAhead at once, then one more per segment received.
  auto send_first = [&](size_t upto) {
    for (; first_sent < std::min(upto, first_segments); ++first_sent) {
      ByteRange seg = layout.segment(first, first_sent);
      t.post_send(next, a.input + seg.offset, seg.bytes);
    }
    if (first_sent < first_segments) return;
    for (const Held& h : held) t.post_send(next, h.data, h.bytes);
    held.clear();
  };
  send_first(kRingSendAhead);

  const std::vector<Step> steps = pass_steps(layout, a.first_chunk - 1);
  const size_t window = kRingRecvWindow, slot_bytes = layout.segment_bytes;
  auto* slots = static_cast<char*>(scratch.get(Scratch::kRecv, window * slot_bytes));
  std::vector<Transport::Request> recvs(steps.size());
  auto post = [&](size_t i) {
    recvs[i] = t.post_recv(prev, slots + (i % window) * slot_bytes, steps[i].segment.bytes);
  };
  for (size_t i = 0; i < std::min(window, steps.size()); ++i) post(i);

  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    t.wait(recvs[i]);
    const size_t elems = st.segment.bytes / es;
    char* d = a.dest(st.chunk) +
              (st.segment.offset - layout.chunks[static_cast<size_t>(st.chunk)].offset);
    reduce_pair(d, a.input + st.segment.offset, slots + (i % window) * slot_bytes, elems, a.dtype,
                a.op);
    if (st.last && a.average_divisor > 0) finish_average(d, elems, a.dtype, a.average_divisor);
    if (i + window < steps.size()) post(i + window);
    send_first(i + 1 + kRingSendAhead);
    if (!st.last || a.forward_owned) {
      if (first_sent < first_segments)
        held.push_back({d, st.segment.bytes});
      else
        t.post_send(next, d, st.segment.bytes);
    }
  }
  send_first(first_segments);
  if (!a.forward_owned) t.wait_all();
}

void ring_all_gather(Transport& t, const RingAllGather& a) {
  const int n = t.size(), next = ring_mod(t.rank() + 1, n), prev = ring_mod(t.rank() - 1, n);
  if (!a.owned_already_sent) send_chunk(t, next, a.layout, ring_mod(a.owned_chunk, n), a.output);

  const std::vector<Step> steps = pass_steps(a.layout, a.owned_chunk - 1);
  std::vector<Transport::Request> recvs(steps.size());
  for (size_t i = 0; i < steps.size(); ++i)
    recvs[i] = t.post_recv(prev, a.output + steps[i].segment.offset, steps[i].segment.bytes);
  for (size_t i = 0; i < steps.size(); ++i) {
    t.wait(recvs[i]);
    if (!steps[i].last)
      t.post_send(next, a.output + steps[i].segment.offset, steps[i].segment.bytes);
  }
  t.wait_all();
}

}  // namespace lockstep
