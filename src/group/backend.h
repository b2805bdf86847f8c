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
  // Why this backend cannot move buffers that live on `device` ("" when it can). The front end
  // turns a non-empty answer into InvalidArgument before queueing. Default: host memory only.
  virtual std::string device_problem(Device device) const {
    if (!device.is_cuda()) return "";
    return "backend '" + name() + "' moves host memory only (use backend 'auto' or 'nccl', " +
           "in a build with CUDA and NCCL)";
  }
  // Memory for ProcessGroup::allocate (call number `index`, the same on every rank; the front end
  // has checked that every rank asks for `bytes`). Collective over the group. May be called while
  // an op runs on the progress thread. Default: ordinary memory (SharedBuffer::local).
  virtual SharedBuffer allocate(size_t bytes, uint64_t /*index*/, Deadline /*deadline*/) {
    return SharedBuffer::local(bytes);
  }
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
// This machine's identity: the host name plus the kernel's boot id, so that two containers that
// share a host name but not memory are not mistaken for one host.
std::string host_identity();
// The backends this build has ("tcp", "shm", ...), without "auto".
std::vector<std::string> backend_names();
// Every backend this build has, including those that need one process per rank (mpi, nccl).
std::vector<std::string> all_backend_names();

}  // namespace lockstep
