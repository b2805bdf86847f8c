// Minimal logging to stderr, with the rank in every line when it is known.
#pragma once

#include <string>

#include "lockstep/core/error.h"

namespace lockstep {

enum class LogLevel { debug, info, warning, error };

// Writes "[lockstep <level> rank R] message" to stderr as one write (lines never interleave).
// info and debug lines appear only when LOCKSTEP_DEBUG is INFO or DETAIL.
void log_line(LogLevel level, const std::string& message);
// The rank shown in log lines of this process (-1: none yet). Set by init_process_group.
void set_log_rank(int rank);

template <class... Args>
void log_info(const Args&... args) {
  log_line(LogLevel::info, detail::concat(args...));
}
template <class... Args>
void log_warning(const Args&... args) {
  log_line(LogLevel::warning, detail::concat(args...));
}

}  // namespace lockstep
