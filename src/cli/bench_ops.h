// The collectives `lockstep bench` times: how big each rank's buffers are for a row of the table,
// the nccl-tests bus-bandwidth factor, and how to run one iteration on a ProcessGroup.
#pragma once

#include <cstddef>

#include "cli/bench_options.h"
#include "lockstep/core/buffer.h"
#include "lockstep/group/process_group.h"

namespace lockstep::cli::bench {

// What one row runs. The same on every rank.
struct OpParams {
  BenchOp op = BenchOp::all_reduce;
  DType dtype = DType::f32;
  ReduceOp reduce_op = ReduceOp::sum;
  int root = 0;
};

// One rank's buffers for one row, and the row's size as nccl-tests reports it: for all_gather,
// reduce_scatter, all_to_all, gather and scatter the whole n-slot buffer (so the element count is
// rounded down to a multiple of n, and up to at least one element per slot); otherwise the one
// buffer every rank sends or receives.
struct Layout {
  size_t bytes = 0;         // the table's size column
  size_t count = 0;         // elements in `bytes`
  size_t input_count = 0;   // elements of this rank's input (0: the op is in place)
  size_t output_count = 0;  // elements of this rank's output (broadcast: its one buffer)
};

Layout layout_for(BenchOp op, size_t bytes, DType dtype, int world_size);

// busbw = algbw * busbw_factor: the share of the data that crosses the slowest link, so that a
// perfect implementation reaches the link bandwidth for every op (the convention of nccl-tests:
// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather and scatter (n-1)/n;
// broadcast and reduce 1).
double busbw_factor(BenchOp op, int world_size);

// Runs one iteration of the op on every rank and waits for it (rethrowing its error). input and
// output are sized by layout_for. Collective: every rank calls it with the same params.
void run_op(ProcessGroup& pg, const OpParams& params, BufferView input, BufferView output);

}  // namespace lockstep::cli::bench
