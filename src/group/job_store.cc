#include "group/job_store.h"

#include <map>
#include <mutex>

#include "core/log.h"
#include "group/attempt_scope.h"
#include "group/optional_backends.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "lockstep/store/file_store.h"
#include "lockstep/store/hash_store.h"
#include "lockstep/store/prefix_store.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"

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
  // A server this process already hosts there (init_process_group, then init_rpc) is shared.
  static std::mutex hosted_mu;
  static std::map<std::string, std::weak_ptr<TcpStore>> hosted;
  const std::string where = rv.master_addr + ":" + std::to_string(rv.master_port);
  const bool shareable = host && rv.master_port != 0;
  std::unique_lock lock(hosted_mu, std::defer_lock);
  if (shareable) {
    lock.lock();
    if (auto existing = hosted[where].lock()) return existing;
  }
  std::shared_ptr<TcpStore> store;
  try {
    store =
        std::make_shared<TcpStore>(TcpStoreOptions{.host = rv.master_addr,
                                                   .port = static_cast<uint16_t>(rv.master_port),
                                                   .is_server = host,
                                                   .timeout = timeout});
    if (shareable) hosted[where] = store;
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

}  // namespace

JobStore open_job_store(const InitOptions& options) {
  milliseconds timeout = options.timeout.value_or(settings().timeout);
  EnvLookup env = process_env();
  JobStore job;
  job.rv = read_rendezvous(options, env);
  set_log_rank(job.rv.rank);
  job.store = options.store ? options.store : open_store(options, job.rv, env, timeout);
  job.own_store = !options.store && !launcher_hosts_store(job.rv, env) &&
                  !env("LOCKSTEP_RESTART_COUNT") && !job.rv.master_addr.empty();
  job.hosts_server =
      job.own_store && job.rv.rank == 0 && options.init_method.rfind("file://", 0) != 0;
  job.advertise_address = advertise_address(job.store);
  job.description = store_text(options, job.rv, env);
  if (!job.rv.derived.empty()) job.description += " (" + job.rv.derived + ")";
  return job;
}

}  // namespace lockstep
