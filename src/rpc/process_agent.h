// The process's agent: what init_rpc starts and the free functions of lockstep/rpc/rpc.h (and
// Python's lockstep.rpc) use.
#pragma once

#include <memory>

#include "rpc/agent.h"

namespace lockstep::rpc {

// The running agent; RpcError ("call init_rpc first") when there is none.
std::shared_ptr<Agent> process_agent();
// Starts it (InvalidArgument when one runs).
void start_process_agent(const std::string& name, int rank, int world_size,
                         const RpcOptions& options);
// Shuts it down and forgets it. A later init_rpc may start another in a new job or attempt (the
// job's store keeps each worker's record of this one).
ShutdownReport stop_process_agent(std::chrono::milliseconds timeout);

// A request body for `target` (a function, or a method of `object`) with these arguments.
Message encode_request(const std::string& target, const std::string* object,
                       std::vector<Value> args, Dict kwargs);

}  // namespace lockstep::rpc
