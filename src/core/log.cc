#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "lockstep/core/settings.h"

namespace lockstep {

namespace {

std::atomic<int> g_rank{-1};

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "?";
}

bool enabled(LogLevel level) {
  if (level >= LogLevel::warning) return true;
  try {
    return settings().debug != DebugLevel::off;
  } catch (const Error&) {
    return true;  // a malformed LOCKSTEP_DEBUG is reported elsewhere; don't hide logs meanwhile
  }
}

}  // namespace

void set_log_rank(int rank) {
  g_rank.store(rank);
}

void log_line(LogLevel level, const std::string& message) {
  if (!enabled(level)) return;
  std::string line = "[lockstep ";
  line += level_name(level);
  int rank = g_rank.load();
  if (rank >= 0) line += " rank " + std::to_string(rank);
  line += "] " + message + "\n";
  // One write, so that lines from several threads or processes never interleave mid-line.
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace lockstep
