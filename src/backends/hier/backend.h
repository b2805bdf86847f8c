// The hierarchical backend: for groups that span several hosts with several ranks on some of
// them. all_reduce runs in three stages (shm within each host, tcp between the host leaders, shm
// again: all_reduce.h); every other op runs over a flat tcp mesh of the whole group, with the
// tcp backend's algorithms. "auto" picks it when the ranks are on more than one host and some
// host runs several (docs/backends.md).
#pragma once

#include <memory>

#include "comm/backend.h"

namespace lockstep {

// Exchanges host identities, connects the flat tcp mesh of the group and attaches the shm
// segment of this rank's host (when it shares the host). Collective over the group, within
// config.timeout. Throws what the tcp and shm backends throw at setup.
std::unique_ptr<Backend> make_hier_backend(const GroupConfig& config);

}  // namespace lockstep
