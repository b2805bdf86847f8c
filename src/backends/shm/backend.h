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

// The shm backend as the within-host stage of an enclosing group (hier runs each host's stages of
// its ops here): a Backend that is also told which op of the enclosing group it serves.
class HostStage : public BackendBase {
 public:
  // [Enclosing ops] (sync.h) Stamps op, an op of the enclosing group, as the one this rank runs
  // now: peers that run another op of that group under the same number fail with a mismatch.
  virtual void set_enclosing(const Op& op) = 0;

 protected:
  using BackendBase::BackendBase;
};

// make_shm_backend, as a host stage.
std::unique_ptr<HostStage> make_host_stage(const GroupConfig& config);

}  // namespace shm

}  // namespace lockstep
