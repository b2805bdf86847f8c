// Shared paths: large collectives whose buffers lie in ProcessGroup::allocate memory
// (shared_alloc.h) skip the chunk buffers: ranks read, and write, each other's buffers directly.
//
// [Shared paths] Before arrival every rank publishes where its buffers lie (publish_refs: the
// allocation id and offset of its input and output, or nothing). After arrival every rank sees
// every rank's refs, so all pick the same path:
//   all_reduce      every input and output allocated (each output the rank's input, or apart from
//                   it): rank r reduces slice r of every input, a block at a time into scratch,
//                   and writes the block into every rank's output.
//   reduce_scatter  every input allocated: rank r reduces its part of every input into its output.
//   all_gather(_v)  every output allocated: rank r writes its input into every output (push);
//                   else every input allocated: rank r copies every input into its output (pull).
//   broadcast       every rank's buffer allocated: rank r copies slice r of the root's buffer into
//                   every other rank's buffer.
// Then each rank votes whether it can take the path (every allocation named is still mapped here,
// and its own input and output overlap only as the op allows), advances and waits for every vote.
// One "no" and every rank takes the usual path instead, one step later (x.base moves past the
// vote). On a shared path a rank does its share, advances, and waits for every rank before it
// returns, so no buffer is touched after the op. Three steps in all: arrival, vote, done.
#pragma once

#include "backends/shm/collective.h"

namespace lockstep::shm {

// Publishes where this rank's buffers of x.op lie (for x's op parity). Call before arrive().
void publish_refs(Collective& x);
// After arrive() (when not every rank's data was inline): runs x.op on a shared path when every
// rank can, and returns true. Returns false when the usual path must run; then x.base is where
// that path starts from.
bool run_shared(Collective& x);
// How many ops (counted once per rank) this process has run on a shared path. For tests.
uint64_t shared_path_ops();

}  // namespace lockstep::shm
