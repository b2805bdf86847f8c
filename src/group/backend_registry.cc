// create_backend: resolves a backend name to an engine. Each backend folder contributes one
// factory; "auto" picks the best one for where the ranks are.
#include "backends/tcp/backend.h"
#include "group/backend.h"
#include "lockstep/core/error.h"
#include "lockstep/core/log.h"

namespace lockstep {

namespace {

struct BackendEntry {
  const char* name;
  std::unique_ptr<Backend> (*make)(const GroupConfig&);
};

constexpr BackendEntry kBackends[] = {
    {"tcp", make_tcp_backend},
};

std::string known_names() {
  std::string names = "auto";
  for (const auto& b : kBackends) names += std::string(", ") + b.name;
  return names;
}

}  // namespace

std::unique_ptr<Backend> create_backend(const GroupConfig& config) {
  // Today auto is tcp everywhere; the shared-memory backend takes over single-host groups.
  std::string name = config.backend == "auto" ? "tcp" : config.backend;
  for (const auto& b : kBackends) {
    if (name == b.name) {
      log_info("group '", config.name, "': rank ", config.rank, " of ", config.size,
               ", backend ", name, (config.backend == "auto" ? " (auto)" : ""));
      return b.make(config);
    }
  }
  throw ConfigError(detail::concat("unknown backend '", config.backend,
                                   "'; available: ", known_names()));
}

}  // namespace lockstep
