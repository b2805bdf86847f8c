// [Agreement check] MPI does not notice when ranks disagree about a collective: a different op,
// count, dtype, root or reduce op gives a hang, a truncation error or wrong data. So before its
// data moves, every collective exchanges a small descriptor of the call (kind, sequence number,
// dtype, reduce op, root, agreed bytes, checksum of the counts), and every rank compares them all:
// in groups of up to kDirectRanks ranks as the head of each rank's block (block_exchange.h),
// which may carry a small op's data too; in larger groups with MPI_Iallgather. all_to_all_v also
// exchanges every rank's send and receive counts, so that each pair's agreement is checked. A
// disagreement is a MismatchError on every rank, naming this rank's call and the first differing
// rank's call, before any data is read.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "backends/mpi/mpi.h"
#include "backends/mpi/wait.h"
#include "comm/op.h"

namespace lockstep::mpi {

inline constexpr size_t kDescriptorFields = 8;
// What a rank says about its call: kind, variant, sequence number, dtype, reduce op, root, agreed
// bytes, counts checksum (fields that do not apply to the kind are zero).
using Descriptor = std::array<int64_t, kDescriptorFields>;
Descriptor describe(const Op& op);

// Compares op's descriptor with every rank's (all[r] for rank r): MismatchError naming this
// rank's call, the first rank whose call differs, its call and the field.
void check_descriptors(const Op& op, std::span<const Descriptor> all, const WaitContext& context);

// Collective over comm (size ranks): exchanges the descriptors with MPI_Iallgather, compares
// them (check_descriptors), then check_counts_pairs. Throws MismatchError when the ranks disagree.
void check_agreement(const Op& op, MPI_Comm comm, int size, const WaitContext& context);

// all_to_all_v only (nothing for other ops), collective over comm: rank i's send_counts[j] must
// equal rank j's recv_counts[i] (MPI_Iallgather of every rank's counts).
void check_counts_pairs(const Op& op, MPI_Comm comm, int size, const WaitContext& context);

}  // namespace lockstep::mpi
