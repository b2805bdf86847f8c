// init_process_group: opens the job's store, checks that the ranks agree on the job, and builds
// the default group.
#include "lockstep/group/init.h"

#include <unistd.h>

#include <algorithm>

#include "comm/group_config.h"
#include "core/log.h"
#include "group/attempt_scope.h"
#include "group/optional_backends.h"
#include "group/rendezvous_env.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "lockstep/store/file_store.h"
#include "lockstep/store/hash_store.h"
#include "lockstep/store/prefix_store.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "store/refusals.h"

namespace lockstep {

namespace {

// Under `lockstep run` the launcher hosts the store (LOCKSTEP_STORE_ADDR/_PORT), so every rank
// is a plain client. LOCKSTEP_USE_AGENT_STORE=1 says the same of MASTER_ADDR/MASTER_PORT.
bool launcher_hosts_store(const EnvRendezvous& rv, const EnvLookup& env) {
  return rv.launcher_store || env("LOCKSTEP_USE_AGENT_STORE").value_or("0") == "1";
}

std::shared_ptr<Store> open_tcp_store(const EnvRendezvous& rv, const EnvLookup& env,
                                      milliseconds timeout) {
  bool host = rv.rank == 0 && !launcher_hosts_store(rv, env);
  if (rv.master_port == 0 && !host)
    throw ConfigError(detail::concat(
        "init_process_group: rank ", rv.rank,
        " has MASTER_PORT=0, but only the process that hosts "
        "the store (rank 0) can pick a free port; the others need the real port. Use `lockstep run "
        "--master-port 0`, which picks one and passes it to every rank"));
  std::shared_ptr<TcpStore> store;
  try {
    store =
        std::make_shared<TcpStore>(TcpStoreOptions{.host = rv.master_addr,
                                                   .port = static_cast<uint16_t>(rv.master_port),
                                                   .is_server = host,
                                                   .timeout = timeout});
  } catch (const AuthError& e) {
    throw AuthError(detail::concat("rank ", rv.rank, ": ", e.what()));
  }
  if (host && rv.master_port == 0) log_info("store listening on free port ", store->port());
  return store;
}

// A launcher's store outlives restarts: each attempt gets its own key space.
std::shared_ptr<Store> scope_to_attempt(std::shared_ptr<Store> store, const EnvLookup& env) {
  auto attempt = env("LOCKSTEP_RESTART_COUNT");
  if (!attempt) return store;
  return std::make_shared<PrefixStore>(
      attempt_prefix(env("LOCKSTEP_RUN_ID").value_or("run"), *attempt), std::move(store));
}

std::shared_ptr<Store> open_store(const InitOptions& options, const EnvRendezvous& rv,
                                  const EnvLookup& env, milliseconds timeout) {
  if (options.init_method.rfind("file://", 0) == 0) {
    return std::make_shared<FileStore>(FileStoreOptions{
        .path = options.init_method.substr(7), .world_size = rv.world_size, .timeout = timeout});
  }
  // Under mpirun without MASTER_ADDR (rendezvous_env.cc leaves it empty), MPI finds the store,
  // when the program links the mpi backend.
  if (rv.master_addr.empty() && mpi::open_bootstrap_store)
    return mpi::open_bootstrap_store({.rank = rv.rank,
                                      .world_size = rv.world_size,
                                      .local_world_size = rv.local_world_size,
                                      .master_port = rv.master_port,
                                      .source = rv.source},
                                     timeout);
  return scope_to_attempt(open_tcp_store(rv, env, timeout), env);
}

// Where the job's store is, for the INFO log.
std::string store_text(const InitOptions& options, const EnvRendezvous& rv, const EnvLookup& env) {
  if (options.store) return "a store given by the caller";
  if (options.init_method.rfind("file://", 0) == 0)
    return "FileStore " + options.init_method.substr(7);
  if (rv.master_addr.empty()) return "found through MPI";
  std::string where = rv.master_addr + ":" + std::to_string(rv.master_port);
  if (launcher_hosts_store(rv, env)) return "TcpStore " + where + " (the launcher's)";
  return "TcpStore " + where + (rv.rank == 0 ? " (hosted by this rank)" : "");
}

// The address peers should use to reach this process.
std::string advertise_address(const std::shared_ptr<Store>& store) {
  if (!settings().socket_addr.empty()) return settings().socket_addr;
  Store* base = store.get();
  if (auto* prefix = dynamic_cast<PrefixStore*>(base)) base = prefix->base().get();
  if (auto* tcp = dynamic_cast<TcpStore*>(base)) return tcp->local_address();
  if (dynamic_cast<HashStore*>(base)) return "127.0.0.1";
  return net::hostname();
}

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
  EnvRendezvous rv = read_rendezvous(InitOptions{}, env);
  return scope_to_attempt(open_tcp_store(rv, env, timeout), env);
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  milliseconds timeout = options.timeout.value_or(settings().timeout);
  EnvLookup env = process_env();
  EnvRendezvous rv = read_rendezvous(options, env);
  set_log_rank(rv.rank);
  std::shared_ptr<Store> store =
      options.store ? options.store : open_store(options, rv, env, timeout);
  const bool own_store = !options.store && !launcher_hosts_store(rv, env) &&
                         !env("LOCKSTEP_RESTART_COUNT") && !rv.master_addr.empty();
  join(*store, options.group_name, rv, timeout, own_store);
  GroupConfig config{.name = options.group_name,
                     .rank = rv.rank,
                     .size = rv.world_size,
                     .store = store,
                     .backend = options.backend,
                     .timeout = timeout,
                     .advertise_address = advertise_address(store),
                     .hostname = net::hostname(),
                     .local_world_size = rv.local_world_size,
                     .secret = job_secret_from_environment()};
  log_info("init_process_group: rank ", rv.rank, " of ", rv.world_size, " (", rv.source,
           "), store ", store_text(options, rv, env), rv.derived.empty() ? "" : " (", rv.derived,
           rv.derived.empty() ? "" : ")", ", advertising ", config.advertise_address);
  return std::make_shared<ProcessGroup>(std::move(config));
}

}  // namespace lockstep
