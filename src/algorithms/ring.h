// The two pipelined passes that every ring algorithm is made of (all_reduce = reduce-scatter pass
// + all-gather pass; reduce_scatter, all_gather and large reduce use one of them each).
//
// A buffer is cut into one chunk per rank (RingLayout), each chunk into segments of at most
// kSegmentBytes; a chunk always has at least one segment, so an empty chunk still sends one
// empty message and every rank posts the same messages. Segments flow around the ring from rank
// r to rank r+1 and are forwarded as soon as each one is ready, so the ring runs as a pipeline
// instead of n-1 store-and-forward steps.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "algorithms/algorithms.h"

namespace lockstep {

struct ByteRange {
  size_t offset = 0;
  size_t bytes = 0;
};

struct RingLayout {
  std::vector<ByteRange> chunks;  // chunk i of the buffer, by byte offset
  size_t segment_bytes = kSegmentBytes;

  int size() const { return static_cast<int>(chunks.size()); }
  size_t segments(int chunk) const;
  ByteRange segment(int chunk, size_t j) const;
};

// `count` elements cut into n chunks as even as possible (the first count % n one element more).
RingLayout even_layout(size_t count, DType dtype, int n);
// Chunk i holds counts[i] elements.
RingLayout counts_layout(const std::vector<size_t>& counts, DType dtype);

// (a % n + n) % n.
inline int ring_mod(int a, int n) {
  return ((a % n) + n) % n;
}

struct RingReduceScatter {
  const RingLayout& layout;
  const char* input;                     // this rank's contribution, laid out as layout
  std::function<char*(int chunk)> dest;  // where the partial sum of a chunk goes
  int first_chunk;                       // sent first, from input; the rank ends owning first+1
  DType dtype;
  ReduceOp op;
  int average_divisor = 0;  // > 0: divide the owned chunk (avg)
  // Whether the owned chunk's segments are sent on to the next rank as they complete (the first
  // step of an all-gather pass that follows).
  bool forward_owned = false;
};

// The reduce-scatter pass: n-1 steps; at step s this rank sends chunk first-s and receives chunk
// first-s-1, reduced with its own input into dest. Receives land in a window of scratch segments.
// The first chunk is paced by what arrives: kRingSendAhead segments at once, then one more per
// segment received, so a large chunk does not wait cooling in socket buffers; the reduced
// segments to forward queue behind it, as the next rank receives in that order.
void ring_reduce_scatter(Transport& t, Scratch& scratch, const RingReduceScatter& args);

struct RingAllGather {
  const RingLayout& layout;
  char* output;  // laid out as layout; the owned chunk is already in place
  int owned_chunk;
  bool owned_already_sent = false;  // ring_reduce_scatter forwarded it already
};

// The all-gather pass: n-1 steps; at step s this rank receives chunk owned-s-1 straight into
// output and forwards it (except at the last step).
void ring_all_gather(Transport& t, const RingAllGather& args);

}  // namespace lockstep
