// Every LOCKSTEP_* environment setting, read in one place (docs/settings.md has the table).
#pragma once

#include <chrono>
#include <string>

namespace lockstep {

enum class DebugLevel { off, info, detail };

struct Settings {
  // LOCKSTEP_TIMEOUT (seconds, may be fractional): default deadline of every collective and store
  // call. Default 300.
  std::chrono::milliseconds timeout{300'000};
  // LOCKSTEP_DEBUG: OFF (default), INFO or DETAIL.
  DebugLevel debug = DebugLevel::off;
  // LOCKSTEP_SOCKET_ADDR: the address this process advertises to peers for data connections.
  // Empty: the address this host uses to reach the store, else the hostname's address.
  std::string socket_addr;
  // LOCKSTEP_TRACE_DIR: where flight-recorder dumps go. Default ./lockstep-trace.
  std::string trace_dir = "lockstep-trace";
};

// The settings of this process, read from the environment on first use. A malformed value throws
// ConfigError naming the variable.
const Settings& settings();

// Parses settings from a getenv-like function; for tests.
Settings parse_settings(const char* (*getenv_fn)(const char*));

}  // namespace lockstep
