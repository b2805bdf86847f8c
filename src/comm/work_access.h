// The completion side of Work, which the public header keeps private: only the thread that runs
// an op (the group's progress thread, or the caller's for an inline op) completes it.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "lockstep/comm/work.h"

namespace lockstep::detail {

using WorkCompletion = std::shared_ptr<WorkState>;

struct WorkAccess {
  // A new op's handle, for the caller, and its completion side, for the thread that runs it.
  static std::pair<WorkPtr, WorkCompletion> make(std::string description);
  // Called once per op: wakes the waiters, then runs the on_complete callbacks.
  static void complete(const WorkCompletion& work, std::exception_ptr error = nullptr);
  // Marks the calling thread as a group's progress thread: a handle dropped there (by an
  // on_complete callback, say) does not wait, since this thread may be the one that must run the
  // op.
  static void mark_progress_thread();
};

}  // namespace lockstep::detail
