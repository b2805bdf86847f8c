// [Piggyback] A small collective travels whole in the agreement blocks (block_exchange.h): each
// rank puts its contribution after its descriptor, and once every block has arrived and every
// descriptor agrees, each rank computes its output from the blocks, with no MPI collective at
// all. One exchange instead of two, and none of a nonblocking collective's scheduling: a 4 KiB
// all_reduce over 2 ranks took 18 us as agreement plus MPI_Iallreduce, against 3 us for a
// blocking MPI_Allreduce (docs/mpi.md has the table).
//
// Which ops: every collective whose largest contribution of one rank is at most
// piggyback_capacity(size) bytes, except all_to_all_v (its counts are checked pair by pair,
// agreement.h). Reductions combine the blocks in rank order on every rank, so every rank gets the
// same bits; f16 and bf16 sums and products accumulate in f32 and round once, as the other
// backends' algorithms do. The user's output is written only after the check: ranks that
// disagree leave every output as it was.
#pragma once

#include <cstddef>

#include "algorithms/algorithms.h"  // Scratch
#include "backends/mpi/block_exchange.h"
#include "comm/op.h"

namespace lockstep::mpi {

// The largest contribution a rank may piggyback in a group of `size` ranks (0: none, above
// kDirectRanks).
size_t piggyback_capacity(int size);

// Whether op travels in the blocks: decided from what every rank agrees on (the op's kind and
// counts), so that ranks that agree also agree on this.
bool piggybacks(const Op& op, int size);

// Copies this rank's contribution to op into `to`; returns its length in bytes.
size_t write_contribution(const Op& op, int rank, std::byte* to);

// After BlockExchange::run: writes this rank's output of op from every rank's block.
void finish_from_blocks(const Op& op, const BlockExchange& blocks, int rank, int size,
                        Scratch& scratch);

}  // namespace lockstep::mpi
