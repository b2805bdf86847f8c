// The LOCKSTEP_* environment settings (src/core/settings_parse.h): parse_settings, with a getenv
// that serves the input.
//
// Input: a byte whose bits say which variables are set, then their values, separated by NUL
// bytes (as in /proc/PID/environ), in the order of kNames. Checked: a malformed value is a
// ConfigError, and what parses is within the documented ranges.
#include <map>

#include "core/settings_parse.h"
#include "fuzz_input.h"
#include "lockstep/core/error.h"

using namespace lockstep;

namespace {

constexpr const char* kNames[] = {"LOCKSTEP_TIMEOUT",         "LOCKSTEP_DEBUG",
                                  "LOCKSTEP_DEBUG_EVERY",     "LOCKSTEP_SOCKET_ADDR",
                                  "LOCKSTEP_TRACE_DIR",       "LOCKSTEP_FLIGHT_RECORDER_SIZE",
                                  "LOCKSTEP_STALL_WARNING_S", "LOCKSTEP_NCCL_NONBLOCKING"};

std::map<std::string, std::string> environment;  // parse_settings takes a plain function

const char* fuzz_getenv(const char* name) {
  auto it = environment.find(name);
  return it == environment.end() ? nullptr : it->second.c_str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::vector<std::string> values = fuzz::split(fuzz::as_text(data + 1, size - 1), '\0');
  environment.clear();
  for (size_t i = 0; i < std::size(kNames); ++i)
    if ((data[0] >> i) & 1) environment[kNames[i]] = i < values.size() ? values[i] : "";
  try {
    const Settings s = parse_settings(fuzz_getenv);
    if (s.timeout.count() < 0 || s.debug_every < 1 || s.flight_recorder_size < 0 ||
        s.stall_warning.count() < 0)
      fuzz::broken("parse_settings accepted a value out of its range");
  } catch (const ConfigError&) {
  }
  return 0;
}
