// Correctness check of `lockstep bench`: each rank fills its input with a pattern of small
// integers that depends on (rank, index), so that every result has a closed form that is exact in
// every dtype at any world size (reductions stay at or below 64, within the integer ranges of bf16
// and i8), then compares its output with that closed form element by element.
#pragma once

#include <cstddef>

#include "cli/bench_ops.h"
#include "lockstep/core/buffer.h"

namespace lockstep::cli::bench {

// Fills this rank's input with the pattern and its output with a sentinel value that no pattern
// or result takes (broadcast: the root's buffer gets the pattern, the others the sentinel).
void fill_for_check(const OpParams& params, int rank, BufferView input, BufferView output);

// How many elements of this rank's output differ from the closed form, after one run_op on
// buffers prepared by fill_for_check. Outputs that the op must leave alone (a non-root's reduce or
// gather output) must still hold the sentinel, exactly. Comparisons are exact, except for the
// results of avg in a float dtype: within a few units in the last place.
size_t count_wrong(const OpParams& params, int rank, int size, ConstBufferView output);

}  // namespace lockstep::cli::bench
