// [Agreement check] MPI does not notice when ranks disagree about a collective: a different op,
// count, dtype, root or reduce op gives a hang, a truncation error or wrong data. So before its
// data moves, every collective exchanges a small descriptor of the call (kind, sequence number,
// dtype, reduce op, root, agreed bytes, checksum of the counts) with MPI_Iallgather, and every
// rank compares them all. all_to_all_v also exchanges every rank's send and receive counts, so
// that each pair's agreement is checked. A disagreement is a MismatchError on every rank, naming
// this rank's call and the first differing rank's call, before any data is read.
#pragma once

#include "backends/mpi/mpi.h"
#include "backends/mpi/wait.h"
#include "comm/op.h"

namespace lockstep::mpi {

// Collective over comm (size ranks). Throws MismatchError when the ranks disagree about op.
void check_agreement(const Op& op, MPI_Comm comm, int size, const WaitContext& context);

}  // namespace lockstep::mpi
