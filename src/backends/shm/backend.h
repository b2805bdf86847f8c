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

namespace shm {
// [Enclosing ops] (sync.h) Stamps op, an op of the group that runs some of its stages on
// host_group (a backend make_shm_backend made), as the one this rank runs now.
void set_enclosing_op(Backend& host_group, const Op& op);
}  // namespace shm

}  // namespace lockstep
