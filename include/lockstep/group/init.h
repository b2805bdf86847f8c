// init_process_group: rendezvous of the job's processes into the default ProcessGroup.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/group/process_group.h"
#include "lockstep/store/store.h"

namespace lockstep {

struct InitOptions {
  // "auto" (the best backend for where the ranks are: shm on one host, hier or tcp across hosts,
  // nccl for CUDA buffers) or a backend's name: "tcp", "shm", "hier", "mpi", "nccl".
  std::string backend = "auto";
  // "env://"  MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (or Slurm / Open MPI variables);
  // "tcp://host:port"  with rank and world_size set here or in RANK / WORLD_SIZE;
  // "file:///path"  a FileStore on a shared filesystem.
  // Ignored when store is set.
  std::string init_method = "env://";
  int rank = -1;        // -1: from the environment
  int world_size = -1;  // -1: from the environment
  // An existing store (e.g. a HashStore shared by threads); rank and world_size are then required.
  std::shared_ptr<Store> store{};
  // Deadline of the rendezvous and default timeout of every op. Default: LOCKSTEP_TIMEOUT.
  std::optional<std::chrono::milliseconds> timeout{};
  // Name of the default group; threads sharing one store as separate jobs need distinct names.
  std::string group_name = "default";
};

// Joins the job and returns its default group. Collective over all world_size processes.
// Errors: ConfigError naming every missing or malformed variable at once (with the launcher
// command that sets them); TimeoutError naming the address tried and the last socket error when
// the store cannot be reached; NetworkError naming the port when MASTER_PORT is taken.
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

// Under `lockstep run`: a client of the launcher's store (LOCKSTEP_STORE_ADDR/_PORT), scoped to
// this attempt's key space as init_process_group scopes it. Null when not under the launcher.
// Throws ConfigError for malformed variables, and what TcpStore throws when the store cannot be
// reached within timeout.
std::shared_ptr<Store> open_launcher_store(std::chrono::milliseconds timeout);

}  // namespace lockstep
