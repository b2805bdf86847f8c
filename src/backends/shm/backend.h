// The shared-memory backend: every rank of the group on one host, collectives through one
// /dev/shm segment at memory speed (docs/shm.md). Same semantics and errors as tcp.
#pragma once

#include <memory>

#include "comm/backend.h"

namespace lockstep {

// Creates or attaches to the group's segment through config.store (collective over the group:
// every member must call it, within config.timeout), and returns when every member has mapped it.
// Throws ConfigError when /dev/shm is too small (naming the size needed and the free space),
// TimeoutError naming the ranks that never attached.
std::unique_ptr<Backend> make_shm_backend(const GroupConfig& config);

}  // namespace lockstep
