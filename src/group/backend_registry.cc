// create_backend: resolves a backend name to an engine, and create_p2p_channel to the byte streams
// of its group's p2p engine. Each backend folder contributes one entry of each; "auto" picks the
// best backend for where the ranks are.
#include <span>

#include "backends/hier/backend.h"
#include "backends/hier/hosts.h"
#include "backends/shm/backend.h"
#include "backends/tcp/backend.h"
#include "backends/tcp/mesh_channel.h"
#include "core/log.h"
#include "group/backend_registry.h"
#include "group/optional_backends.h"
#include "lockstep/core/error.h"
#include "p2p/shm_channel.h"

namespace lockstep {

namespace {

using ChannelFactory = std::unique_ptr<p2p::Channel> (*)(const GroupConfig&, const Backend&);

struct BackendEntry {
  const char* name;
  std::unique_ptr<Backend> (*make)(const GroupConfig&);
  // The byte streams under the group's p2p engine, given the backend (whose connections it may
  // share: Backend::peer_links); null where the backend moves its own sends and recvs
  // (Backend::fuses_p2p: nccl), or where the program lacks the component.
  ChannelFactory make_channel;
};

std::unique_ptr<p2p::Channel> make_shm_channel(const GroupConfig& config, const Backend&) {
  return std::make_unique<p2p::ShmChannel>(config);
}

constexpr BackendEntry kBackends[] = {
    {"tcp", tcp::make_tcp_backend, tcp::make_mesh_channel},
    {"shm", make_shm_backend, make_shm_channel},
    {"hier", make_hier_backend, tcp::make_mesh_channel},
};

// Backends that need one process per rank under mpirun: named explicitly, never chosen by auto,
// and not in backend_names() (the list the ranks-as-threads tests run). nccl is here too: it
// needs CUDA buffers and a GPU per rank (auto uses it for CUDA buffers, docs/nccl.md). Both are
// optional components (group/optional_backends.h): make is null where the program lacks one.
const BackendEntry kProcessBackends[] = {
    {"mpi", make_mpi_backend, make_mpi_p2p_channel},
    {"nccl", make_nccl_backend, nullptr},
};

std::string known_names() {
  std::string names = "auto";
  for (const auto& b : kBackends) names += std::string(", ") + b.name;
  for (const auto& b : kProcessBackends)
    if (b.make) names += std::string(", ") + b.name;
  return names;
}

// shm when every member runs on one host, hier when the members span hosts and some host runs
// several, else tcp. Collective: exchanges host identities through the store (hier/hosts.h).
// `why` gets the reason, for the INFO log.
std::string resolve_auto(const GroupConfig& config, std::string& why) {
  hier::HostMap hosts = hier::exchange_hosts(config);
  why = detail::concat("auto: ", config.size, " ranks on ", hosts.hosts.size(),
                       hosts.hosts.size() == 1 ? " host" : " hosts");
  if (hosts.hosts.size() == 1) return "shm";
  bool shared = hosts.is_multi_host_with_shared_hosts();
  why += shared ? ", some with several ranks" : ", one rank each";
  return shared ? "hier" : "tcp";
}

}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& b : kBackends) names.emplace_back(b.name);
  return names;
}

std::vector<std::string> all_backend_names() {
  std::vector<std::string> names = backend_names();
  for (const auto& b : kProcessBackends)
    if (b.make) names.emplace_back(b.name);
  return names;
}

std::unique_ptr<Backend> create_backend(const GroupConfig& config) {
  std::string why = "named in the options";
  std::string name = config.backend == "auto" ? resolve_auto(config, why) : config.backend;
  for (const auto& b : kBackends) {
    if (name == b.name) {
      log_info("group '", config.name, "': backend ", name, " (", why, ")");
      // Under auto, ops on CUDA buffers go to an nccl backend made on first use (docs/nccl.md).
      if (config.backend == "auto" && route_device_buffers_to_nccl)
        return route_device_buffers_to_nccl(b.make(config), config);
      return b.make(config);
    }
  }
  for (const auto& b : kProcessBackends) {
    if (name != b.name) continue;
    LOCKSTEP_ENFORCE(b.make, ConfigError, "group '", config.name, "': backend '", name,
                     "' is an optional component that this program does not link. Build "
                     "lockstep where ",
                     name == std::string("mpi") ? "MPI" : "CUDA and NCCL",
                     " are found, and link lockstep::", name,
                     " (CMake: find_package(lockstep COMPONENTS ", name, "))");
    log_info("group '", config.name, "': rank ", config.rank, " of ", config.size, ", backend ",
             name);
    return b.make(config);
  }
  throw ConfigError(
      detail::concat("unknown backend '", config.backend, "'; available: ", known_names()));
}

std::unique_ptr<p2p::Channel> create_p2p_channel(const GroupConfig& config,
                                                 const Backend& backend) {
  for (std::span<const BackendEntry> table :
       {std::span<const BackendEntry>(kBackends), std::span<const BackendEntry>(kProcessBackends)})
    for (const BackendEntry& b : table)
      if (backend.name() == b.name)
        return b.make_channel ? b.make_channel(config, backend) : nullptr;
  return nullptr;
}

}  // namespace lockstep
