// The completion side of Work, which the public header keeps private: only the thread that runs
// an op (the group's progress thread) makes its Work and completes it.
#pragma once

#include <exception>
#include <string>

#include "lockstep/comm/work.h"

namespace lockstep::detail {

struct WorkAccess {
  static WorkPtr make(std::string description) {
    return WorkPtr(new Work(std::move(description)));
  }
  static void complete(Work& work, std::exception_ptr error = nullptr) {
    work.complete(std::move(error));
  }
};

}  // namespace lockstep::detail
