// The launcher's one summary of a run: the root cause (time, host, rank, local rank, pid, exit
// code or signal name, last stderr lines), one line for every other failed rank, and one line
// per attempt. Pure formatting.
#pragma once

#include <string>
#include <vector>

#include "launcher/attempt.h"

namespace lockstep::launcher {

struct SummaryContext {
  int node_rank = 0;
  std::string run_id;
  int max_restarts = 0;
};

// The report of a run that ended in failure or interruption: attempts.back() is the final one.
std::string format_failure_summary(const std::vector<AttemptResult>& attempts,
                                   const SummaryContext& context);

// The short report of a run that succeeded after restarts ("" when the first attempt succeeded).
std::string format_success_summary(const std::vector<AttemptResult>& attempts,
                                   const SummaryContext& context);

// One line about how an attempt ended, e.g. "rank 3 (local rank 1) exited with code 2".
std::string describe_attempt(const AttemptResult& attempt);

// The launcher's exit code for an attempt that did not succeed: the root cause's exit code,
// 128 + signal for a signal, the failed node's code for a remote failure.
int failure_exit_code(const AttemptResult& attempt);

}  // namespace lockstep::launcher
