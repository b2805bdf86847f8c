// MpiChannel: the byte streams of an mpi group's p2p engine (src/p2p/channel.h), over MPI itself,
// so that sends and recvs of the mpi backend get the engine's independent progress, batches,
// any-source receives and diagnoses.
//
// The channel has a communicator of its own (the group's members, apart from the collectives'
// one). Each stream is a sequence of chunks of at most kChunkBytes: write() copies into one of a
// few send slots per peer and starts an MPI_Isend; each peer has two MPI_Irecv posted into
// receive slots, consumed in the order they were posted (MPI's non-overtaking rule keeps the
// chunks of one stream in order). sleep() tests the requests every few tens of microseconds: MPI
// has no descriptor to wait on. Once the engine has had nothing pending for 5 ms, sleep_idle()
// tests them ever more rarely (up to every 20 ms) until bytes come or wake(), so an idle group
// takes next to no CPU.
#pragma once

#include <memory>

#include "comm/backend.h"
#include "comm/group_config.h"
#include "p2p/channel.h"

namespace lockstep {

// Defined in the mpi component; the composition root reaches it through a weak reference
// (src/group/optional_backends.h). Collective over the group's members (it makes a communicator).
std::unique_ptr<p2p::Channel> make_mpi_p2p_channel(const GroupConfig& config,
                                                   const Backend& backend);

}  // namespace lockstep
