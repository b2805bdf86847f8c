// What the Agent's files share (src/rpc/agent*.cc).
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/deadline.h"

#include "lockstep/rpc/rpc.h"

namespace lockstep::rpc {

// "0.32 s", for messages.
std::string seconds_text(Clock::duration d);

inline constexpr uint64_t kListenerId = 1;  // the poller's key of the listener
inline constexpr uint64_t kWakeId = 2;      // and of the eventfd that stops the pool
inline constexpr uint64_t kKickId = 3;      // and of the one that hands lanes to other threads

// Whether this thread is running a registered function (it may still call during shutdown).
extern thread_local bool t_in_handler;
// The worker whose call this thread is running (null outside a function).
extern thread_local const WorkerInfo* t_caller;

}  // namespace lockstep::rpc
