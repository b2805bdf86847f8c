// The backend registry: the one place that knows the concrete backends (src/backends/*) and the
// channels of their p2p engines (src/p2p). It turns a backend name, or "auto", into a Backend for
// a group, and a backend's name into its p2p channel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "p2p/channel.h"

namespace lockstep {

// Creates the backend `config.backend` names ("auto" resolves here). Collective over the group:
// connects to every member through config.store. Throws ConfigError for an unknown name.
std::unique_ptr<Backend> create_backend(const GroupConfig& config);
// The byte streams under the p2p engine of a group whose backend is `backend` (by its resolved
// name, Backend::name()): shared memory for shm, the mesh's own connections for tcp and hier, MPI
// for mpi. Null for a backend that moves its own sends and recvs (nccl), or one this program does
// not link.
std::unique_ptr<p2p::Channel> create_p2p_channel(const GroupConfig& config, const Backend& backend);
// The backends this build has ("tcp", "shm", ...), without "auto".
std::vector<std::string> backend_names();
// Every backend this build has, including those that need one process per rank (mpi, nccl).
std::vector<std::string> all_backend_names();

}  // namespace lockstep
