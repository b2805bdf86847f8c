#include "lockstep/core/settings.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include "core/settings_parse.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::chrono::milliseconds parse_seconds(const char* name, const char* text) {
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || seconds > 1e9)
    throw ConfigError(detail::concat(
        name, "='", text, "' is not a positive number of seconds (e.g. ", name, "=300)"));
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

int parse_positive(const char* name, const char* text) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > (1L << 30))
    throw ConfigError(
        detail::concat(name, "='", text, "' is not a positive integer (e.g. ", name, "=100)"));
  return static_cast<int>(value);
}

DebugLevel parse_debug(const char* text) {
  std::string v = upper(text);
  if (v.empty() || v == "OFF" || v == "0") return DebugLevel::off;
  if (v == "INFO") return DebugLevel::info;
  if (v == "DETAIL") return DebugLevel::detail;
  throw ConfigError(detail::concat("LOCKSTEP_DEBUG='", text, "' is not one of OFF, INFO, DETAIL"));
}

}  // namespace

Settings parse_settings(const char* (*getenv_fn)(const char*)) {
  Settings s;
  if (const char* v = getenv_fn("LOCKSTEP_TIMEOUT"))
    s.timeout = parse_seconds("LOCKSTEP_TIMEOUT", v);
  if (const char* v = getenv_fn("LOCKSTEP_DEBUG")) s.debug = parse_debug(v);
  if (const char* v = getenv_fn("LOCKSTEP_DEBUG_EVERY"))
    s.debug_every = parse_positive("LOCKSTEP_DEBUG_EVERY", v);
  if (const char* v = getenv_fn("LOCKSTEP_SOCKET_ADDR")) s.socket_addr = v;
  if (const char* v = getenv_fn("LOCKSTEP_BIND_ADDR")) s.bind_addr = v;
  if (const char* v = getenv_fn("LOCKSTEP_TRACE_DIR"); v && *v) s.trace_dir = v;
  if (const char* v = getenv_fn("LOCKSTEP_FLIGHT_RECORDER_SIZE"))
    s.flight_recorder_size =
        std::string_view(v) == "0" ? 0 : parse_positive("LOCKSTEP_FLIGHT_RECORDER_SIZE", v);
  if (const char* v = getenv_fn("LOCKSTEP_STALL_WARNING_S"))
    s.stall_warning = parse_seconds("LOCKSTEP_STALL_WARNING_S", v);
  if (const char* v = getenv_fn("LOCKSTEP_LINK_TIMEOUT"))
    s.link_timeout = std::string_view(v) == "0" ? std::chrono::milliseconds(0)
                                                : parse_seconds("LOCKSTEP_LINK_TIMEOUT", v);
  if (const char* v = getenv_fn("LOCKSTEP_NCCL_NONBLOCKING")) {
    std::string_view t(v);
    if (t != "0" && t != "1")
      throw ConfigError(detail::concat("LOCKSTEP_NCCL_NONBLOCKING='", t, "' is not 0 or 1"));
    s.nccl_nonblocking = t == "1";
  }
  return s;
}

const Settings& settings() {
  static const Settings s =
      parse_settings([](const char* name) -> const char* { return std::getenv(name); });
  return s;
}

const char* setting_name(LiveSetting setting) {
  switch (setting) {
    case LiveSetting::secret:
      return "LOCKSTEP_SECRET";
    case LiveSetting::secret_file:
      return "LOCKSTEP_SECRET_FILE";
    case LiveSetting::host_id:
      return "LOCKSTEP_HOST_ID";
    case LiveSetting::python:
      return "LOCKSTEP_PYTHON";
    case LiveSetting::explain_signatures:
      return "LOCKSTEP_EXPLAIN_SIGNATURES";
    case LiveSetting::store_addr:
      return "LOCKSTEP_STORE_ADDR";
    case LiveSetting::store_port:
      return "LOCKSTEP_STORE_PORT";
    case LiveSetting::run_id:
      return "LOCKSTEP_RUN_ID";
    case LiveSetting::attempt:
      return "LOCKSTEP_ATTEMPT";
    case LiveSetting::timeout:
      return "LOCKSTEP_TIMEOUT";
  }
  return "";
}

std::optional<std::string> live_setting(LiveSetting setting) {
  const char* v = std::getenv(setting_name(setting));
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace lockstep
