// The skeleton every shm collective shares: arrival with a descriptor, then (for data that does not
// fit the small slots) pipelined rounds over the chunk buffers.
//
// [Steps] Each rank has one step counter. Every collective advances it by the same amount on every
// rank: 1 at arrival, then 2 per round (A: "my chunk buffer holds round c", B: "I have consumed
// round c"). So all ranks enter an op at the same base step, and "rank p reached base + k" means
// "rank p has finished phase k of this op". A rank that has nothing to do in a phase still
// advances.
//
// [Arrival] A rank publishes its descriptor (and, for small data, its payload in its small slot of
// this op's parity), advances, and waits until every rank has arrived. It then checks the
// descriptors (MismatchError before touching data). Because every rank waits for all the others
// at each arrival, a rank that has arrived at op k+1 has finished reading everything of op k: the
// small slot and descriptor of parity k%2 can be rewritten at op k+2, and the chunk buffers are
// free at every arrival.
//
// [Rounds] Round c uses chunk buffer c % kChunkDepth. Before writing it (produce), a rank waits
// until every rank has reached A(c - depth + 1), which each rank only does after consuming and
// finishing round c - depth. It then advances (A(c)), waits for the ranks it reads from, consumes,
// advances (B(c)) and, for ops with a second read (all_reduce's copy-out), waits for every B(c)
// and finishes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/shm/layout.h"
#include "backends/shm/reducer.h"
#include "backends/shm/shared_alloc.h"
#include "backends/shm/sync.h"
#include "comm/op.h"

namespace lockstep::shm {

struct Collective {
  const Op& op;
  const SegmentView& seg;
  Sync& sync;
  Reducer& reducer;
  int me = 0;
  int n = 1;
  int parity = 0;                                  // the local collective index mod 2
  uint32_t base = 0;                               // this rank's step when the op started
  size_t es = 1;                                   // element size
  const SharedAllocations* allocations = nullptr;  // this rank's (shared_collectives.h)

  uint32_t arrived() const { return base + 1; }
  uint32_t produced(size_t round) const { return base + 2 + 2 * static_cast<uint32_t>(round); }
  uint32_t consumed(size_t round) const { return base + 3 + 2 * static_cast<uint32_t>(round); }
  std::byte* small(int r) const { return seg.small_slot(r, parity); }
  std::byte* chunk(int r, size_t round) const { return seg.chunk(r, round); }
  size_t chunk_bytes() const { return seg.layout().chunk_bytes; }
  // Chunk bytes split into n regions (one per destination rank), whole cache lines each.
  size_t region_bytes() const;
};

// Publishes this rank's descriptor, advances, waits for every rank, checks their descriptors.
// Returns whether every rank put its payload inline (then the op is done in its small slots).
bool arrive(Collective& x, uint64_t payload_bytes, bool inline_data);

// A range of elements [begin, end).
struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};
// Slice q of n of `len` elements, boundaries on whole cache lines where possible.
Range slice_of(size_t len, int q, int n, size_t es);
// Part `round` of a segment of `count` elements cut into parts of `per` elements (maybe empty).
Range part_of(size_t count, size_t round, size_t per);
// Rounds needed for the largest of counts in parts of `per` elements.
size_t rounds_for(size_t max_count, size_t per);

struct RoundPlan {
  size_t rounds = 0;
  bool produces = false;  // this rank writes its chunk buffers
  bool consumes = false;  // this rank reads others' buffers after A(c)
  int source = -1;        // whose A(c) consume waits for: -1 every rank, else that rank
  bool finishes = false;  // this rank reads again after every rank's B(c)
};

template <class Produce, class Consume, class Finish>
void run_rounds(Collective& x, const RoundPlan& plan, Produce produce, Consume consume,
                Finish finish) {
  for (size_t c = 0; c < plan.rounds; ++c) {
    if (plan.produces) {
      if (c >= kChunkDepth) x.sync.wait_all(x.produced(c + 1 - kChunkDepth), x.op);
      produce(c);
    }
    x.sync.bump();  // A(c)
    if (plan.consumes) {
      if (plan.source < 0)
        x.sync.wait_all(x.produced(c), x.op);
      else if (plan.source != x.me)
        x.sync.wait_step(plan.source, x.produced(c), x.op);
      consume(c);
    }
    x.sync.bump();  // B(c)
    if (plan.finishes) {
      x.sync.wait_all(x.consumed(c), x.op);
      finish(c);
    }
  }
}

// One function per collective kind. Each runs the whole op on this rank.
void run_all_reduce(Collective& x);  // all_reduce and reduce
void run_reduce_scatter(Collective& x);
void run_broadcast(Collective& x);
void run_gather(Collective& x);  // all_gather and gather, uniform and _v
void run_scatter(Collective& x);
void run_all_to_all(Collective& x);

}  // namespace lockstep::shm
