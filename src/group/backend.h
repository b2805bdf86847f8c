// Backend: the engine that moves a group's bytes. One folder per backend under src/backends/, each
// with the same file names. The ProcessGroup front end validates calls and orders them; a backend
// only executes ops, one at a time, on the group's progress thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/group/process_group.h"
#include "group/op.h"

namespace lockstep {

class Backend {
 public:
  virtual ~Backend() = default;
  // "tcp", "shm", ...
  virtual const std::string& name() const = 0;
  // Runs op to completion or throws (NetworkError, MismatchError, TimeoutError). Called from one
  // thread at a time, in issue order. op.deadline bounds every wait.
  virtual void run(const Op& op) = 0;
  // Whether op may run on the calling thread when nothing else is queued (small ops on a
  // low-latency backend: saves the hand-off to the progress thread). Default: never.
  virtual bool prefers_inline(const Op& /*op*/) const { return false; }
  // After a failure on this rank: tells the peers (so they fail fast with the cause) and makes
  // every later run() throw. Idempotent. `reason` is the original error's message.
  virtual void abort(const std::string& reason) = 0;
  // Orderly goodbye at destruction: tells peers this rank is done and lingers up to the deadline
  // so that slower peers are not mistaken for dead ones.
  virtual void shutdown(Deadline deadline) = 0;
};

// Creates the backend `config.backend` names ("auto" resolves here). Collective over the group:
// connects to every member through config.store. Throws ConfigError for an unknown name.
std::unique_ptr<Backend> create_backend(const GroupConfig& config);
// The backends this build has ("tcp", "shm", ...), without "auto".
std::vector<std::string> backend_names();

}  // namespace lockstep
