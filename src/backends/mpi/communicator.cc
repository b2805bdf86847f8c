#include "backends/mpi/communicator.h"

#include <functional>
#include <mutex>
#include <shared_mutex>

#include "backends/mpi/runtime.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// Checks that the group's ranks are MPI_COMM_WORLD ranks, with this process where the group
// says it is.
void check_world_ranks(const GroupConfig& config) {
  const int world = world_size();
  const int me = world_rank();
  const int global = config.global_ranks[static_cast<size_t>(config.rank)];
  const std::string hint =
      "The mpi backend runs on MPI_COMM_WORLD: start every rank with mpirun (or srun) and call "
      "init_process_group without a rank or world size, so that they come from MPI";
  LOCKSTEP_ENFORCE(global == me, ConfigError, "mpi backend, group '", config.name, "': rank ",
                   config.rank, " is global rank ", global, ", but this process is rank ", me,
                   " of MPI_COMM_WORLD (size ", world, "). ", hint);
  for (int g : config.global_ranks)
    LOCKSTEP_ENFORCE(g < world, ConfigError, "mpi backend, group '", config.name, "': global rank ",
                     g, " is not below the size of MPI_COMM_WORLD (", world, "). ", hint);
}

// Waits until every member has registered in the store, so that MPI_Comm_create_group (which
// cannot time out) starts only when every member is about to call it.
void wait_for_members(const GroupConfig& config) {
  const std::string prefix = config.name + "/mpi/ready/";
  config.store->set(prefix + std::to_string(config.rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < config.size; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    config.store->wait(keys, config.timeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < config.size; ++r)
      if (!config.store->check({keys[static_cast<size_t>(r)]}))
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw TimeoutError(detail::concat("mpi backend, group '", config.name, "': ranks [", missing,
                                      "] never joined within ", config.timeout.count() / 1000.0,
                                      " s; every member must create the group"));
  }
}

}  // namespace

Communicator::Communicator(const GroupConfig& config) {
  ensure_initialized();
  check_world_ranks(config);
  wait_for_members(config);
  MPI_Group world_group = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, config.size, config.global_ranks.data(), &members);
  // Concurrent creations (threads making different groups) are told apart by the tag.
  const int tag = static_cast<int>(std::hash<std::string>{}(config.name) & 0x7fff);
  int code;
  {
    std::unique_lock<std::shared_mutex> changing(communicator_changes());
    code = MPI_Comm_create_group(MPI_COMM_WORLD, members, tag, &comm_);
  }
  MPI_Group_free(&members);
  MPI_Group_free(&world_group);
  if (code != MPI_SUCCESS)
    throw NetworkError(detail::concat("mpi backend, group '", config.name, "': rank ", config.rank,
                                      " could not create the group's communicator "
                                      "(MPI_Comm_create_group): ",
                                      error_text(code)));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

Communicator::~Communicator() {
  free_communicator(comm_);
}

}  // namespace lockstep::mpi
