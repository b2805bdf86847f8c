// create_backend: resolves a backend name to an engine. Each backend folder contributes one
// factory; "auto" picks the best one for where the ranks are.
#include <fstream>

#include "backends/shm/backend.h"
#include "backends/tcp/backend.h"
#include "group/backend.h"
#include "lockstep/core/error.h"
#include "lockstep/core/log.h"
#include "net/socket.h"

namespace lockstep {

namespace {

struct BackendEntry {
  const char* name;
  std::unique_ptr<Backend> (*make)(const GroupConfig&);
};

constexpr BackendEntry kBackends[] = {
    {"tcp", make_tcp_backend},
    {"shm", make_shm_backend},
};

std::string known_names() {
  std::string names = "auto";
  for (const auto& b : kBackends) names += std::string(", ") + b.name;
  return names;
}

// This machine's identity: the host name plus the kernel's boot id, so that two containers that
// share a host name but not memory are not mistaken for one host.
std::string host_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return net::hostname() + "/" + boot_id;
}

// Whether every member of the group runs on this host. Collective: exchanges identities through
// the store.
bool all_on_one_host(const GroupConfig& config) {
  std::string prefix = config.name + "/hosts/";
  std::string mine = host_identity();
  config.store->set(prefix + std::to_string(config.rank), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < config.size; ++r) keys.push_back(prefix + std::to_string(r));
  for (const auto& id : config.store->multi_get(keys, config.timeout))
    if (id != mine) return false;
  return true;
}

std::string resolve_auto(const GroupConfig& config) {
  for (const auto& b : kBackends)
    if (std::string_view(b.name) == "shm") return all_on_one_host(config) ? "shm" : "tcp";
  return "tcp";
}

}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& b : kBackends) names.emplace_back(b.name);
  return names;
}

std::unique_ptr<Backend> create_backend(const GroupConfig& config) {
  std::string name = config.backend == "auto" ? resolve_auto(config) : config.backend;
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
