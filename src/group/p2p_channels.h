// make_p2p_channel: the byte streams under a group's p2p engine (src/p2p/engine.h), by backend:
// shared memory for shm, sockets for tcp and hier, MPI for mpi (when the program links it).
// Null for a backend that moves its own p2p messages (nccl, through ncclSend/ncclRecv).
#pragma once

#include <memory>
#include <string>

#include "comm/group_config.h"
#include "p2p/channel.h"

namespace lockstep {

std::unique_ptr<p2p::Channel> make_p2p_channel(const GroupConfig& config,
                                               const std::string& backend);

}  // namespace lockstep
