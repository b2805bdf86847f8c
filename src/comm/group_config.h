// GroupConfig: what a group is made of, as the composition root (src/group) hands it to a backend.
// Filled in by init_process_group and ProcessGroup::new_group; internal (the public API makes
// groups through those two).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/store/store.h"

namespace lockstep {

struct GroupConfig {
  std::string name;               // unique in the job: "default", "default/1", ...
  int rank = 0;                   // this process's rank in the group
  int size = 1;                   // number of members
  std::vector<int> global_ranks;  // member i's rank in the default group
  std::shared_ptr<Store> store;   // the job's store (groups scope their keys by name)
  // Where reports for the launcher go (blame keys naming the ranks a timeout waited for); null:
  // `store`. The torch backend sets it to the launcher's store, since its `store` is torch's.
  std::shared_ptr<Store> report_store;
  // A name from the registry (src/group/backend_registry.h: "tcp", "shm", "hier", "mpi", "nccl")
  // or "auto", which the registry resolves for where the ranks are.
  std::string backend = "auto";
  std::chrono::milliseconds timeout{300'000};
  std::string advertise_address;  // address peers use to connect to this process
  std::string hostname;           // this host's name, for error messages ("": the system's)
  // The job's ranks on this host, in every group (LOCAL_WORLD_SIZE or the launcher's equivalent);
  // -1: unknown. Waits spin for a peer only when every rank has a core (src/core/host_cores.h).
  int local_world_size = -1;
  // The job's secret (src/net/auth.h): the group's own connections (the tcp and hier mesh, the
  // p2p stream on it) prove it in both directions. "": unauthenticated. Never logged.
  std::string secret;
};

// config.hostname, or the system's host name when it is empty.
std::string host_name_of(const GroupConfig& config);

}  // namespace lockstep
