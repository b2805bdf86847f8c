// The backend registry: the one place that knows the concrete backends (src/backends/*). It
// turns a backend name, or "auto", into a Backend for a group.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/backend.h"

namespace lockstep {

// Creates the backend `config.backend` names ("auto" resolves here). Collective over the group:
// connects to every member through config.store. Throws ConfigError for an unknown name.
std::unique_ptr<Backend> create_backend(const GroupConfig& config);
// The backends this build has ("tcp", "shm", ...), without "auto".
std::vector<std::string> backend_names();
// Every backend this build has, including those that need one process per rank (mpi, nccl).
std::vector<std::string> all_backend_names();

}  // namespace lockstep
