// Fused reduction with non-temporal stores, for the shared paths (shared_collectives.h): sums the
// same run of elements of several sources, in rank order, and writes the result straight to memory
// at every destination. Each source is read once and no destination line is read for ownership,
// which is what a large reduction over buffers far bigger than the caches is bound by.
#pragma once

#include <cstddef>

#include "lockstep/core/dtype.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::shm {

// dsts[d][i] = ((srcs[0][i] + srcs[1][i]) + ...) + srcs[n-1][i] for every d, bit for bit as the
// Reducer computes it. A destination may be one of the sources (in place). Returns false, having
// written nothing, where it does not apply (only f32 and f64 sums, on CPUs with AVX2, when every
// destination has the same alignment mod 32); the caller then uses the Reducer.
bool stream_reduce(void* const* dsts, int ndst, const void* const* srcs, int n, size_t count,
                   DType dtype, ReduceOp op);

// The same sum, written twice in one pass: into `keep` with ordinary stores (it stays in cache for
// peers that read it soon: the pipelined all_reduce's chunk buffer) and into `dst` with
// non-temporal stores (the output). dst may be one of the sources (in place); keep must not
// overlap any. Returns false, having written nothing, for what stream_reduce declines (only f32
// and f64 sums, with AVX2) or a dst not aligned to its element size.
bool stream_reduce_keep(void* keep, void* dst, const void* const* srcs, int n, size_t count,
                        DType dtype, ReduceOp op);

}  // namespace lockstep::shm
