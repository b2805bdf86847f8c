// init_process_group: opens the job's store, checks that the ranks agree on the job, and builds
// the default group.
#include "lockstep/group/init.h"

#include <unistd.h>

#include <algorithm>

#include "comm/group_config.h"
#include "core/log.h"
#include "group/attempt_scope.h"
#include "group/job_store.h"
#include "group/rendezvous_env.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "store/refusals.h"

namespace lockstep {

namespace {

// Registers this rank and waits for every other. Catches ranks that disagree on the world size,
// two processes with the same rank, and ranks that never arrive (named at the deadline), or a
// process the store turned away while ranks are missing (named kRefusalGrace after it: the
// missing rank may have been started with another secret, src/store/refusals.h). `own_store`:
// the store is this job's alone (env://, no launcher), so every refusal it holds counts.
void join(Store& store, const std::string& group, const EnvRendezvous& rv, milliseconds timeout,
          bool own_store) {
  std::string prefix = group + "/init/";
  std::string ws = std::to_string(rv.world_size);
  std::string agreed = store.compare_set(prefix + "world_size", "", ws);
  LOCKSTEP_ENFORCE(agreed == ws, ConfigError, "init_process_group: rank ", rv.rank,
                   " has world size ", ws, " but another rank joined with world size ", agreed,
                   ": every rank must use the same WORLD_SIZE");
  std::string me = net::hostname() + " pid " + std::to_string(::getpid());
  std::string holder = store.compare_set(prefix + "rank/" + std::to_string(rv.rank), "", me);
  LOCKSTEP_ENFORCE(holder == me, ConfigError, "init_process_group: rank ", rv.rank,
                   " joined twice (", holder, " and ", me,
                   "): two processes have the same RANK. Give each process its own RANK "
                   "(lockstep run does)");
  std::vector<std::string> keys;
  for (int r = 0; r < rv.world_size; ++r) keys.push_back(prefix + "rank/" + std::to_string(r));
  auto missing = [&] {
    std::string text;
    for (int r = 0; r < rv.world_size; ++r)
      if (!store.check({keys[static_cast<size_t>(r)]}))
        text += (text.empty() ? "" : ", ") + std::to_string(r);
    return text;
  };
  RefusalWatch refusals(store, own_store);
  const Deadline deadline = Deadline::after(timeout);
  for (;;) {
    try {
      store.wait(keys, std::min(kRefusalPoll, std::max(deadline.remaining(), milliseconds(1))));
      return;
    } catch (const TimeoutError&) {
      if (auto refused = refusals.overdue()) {
        throw ConfigError(
            detail::concat("init_process_group: ranks [", missing(), "] of ", rv.world_size,
                           " have not joined, and the store turned a process away (", *refused,
                           ") ", kRefusalGrace.count() / 1000.0,
                           " s ago: was a missing rank started with another "
                           "secret, or without one? Give every rank the same LOCKSTEP_SECRET or "
                           "LOCKSTEP_SECRET_FILE (lockstep run passes its own)"));
      }
      if (deadline.expired()) {
        throw TimeoutError(
            detail::concat("init_process_group: ranks [", missing(), "] of ", rv.world_size,
                           " never joined within ", timeout.count() / 1000.0,
                           " s. Did they start, with the same MASTER_ADDR/MASTER_PORT (or "
                           "LOCKSTEP_STORE_ADDR/_PORT)?"));
      }
    }
  }
}

}  // namespace

std::string attempt_prefix(const std::string& run_id, const std::string& attempt) {
  return run_id + "/attempt_" + attempt;
}

std::shared_ptr<Store> open_launcher_store(milliseconds timeout) {
  EnvLookup env = process_env();
  if (!env("LOCKSTEP_STORE_ADDR") && !env("LOCKSTEP_STORE_PORT")) return nullptr;
  // Read (and checked) as init_process_group reads them; a client, since the launcher hosts it.
  InitOptions options;
  options.timeout = timeout;
  return open_job_store(options).store;
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  milliseconds timeout = options.timeout.value_or(settings().timeout);
  JobStore job = open_job_store(options);
  const EnvRendezvous& rv = job.rv;
  std::shared_ptr<Store> store = job.store;
  join(*store, options.group_name, rv, timeout, job.own_store);
  GroupConfig config{.name = options.group_name,
                     .rank = rv.rank,
                     .size = rv.world_size,
                     .store = store,
                     .backend = options.backend,
                     .timeout = timeout,
                     .advertise_address = job.advertise_address,
                     .hostname = net::hostname(),
                     .local_world_size = rv.local_world_size,
                     .secret = job_secret_from_environment()};
  log_info("init_process_group: rank ", rv.rank, " of ", rv.world_size, " (", rv.source,
           "), store ", job.description, ", advertising ", config.advertise_address);
  return std::make_shared<ProcessGroup>(std::move(config));
}

}  // namespace lockstep
