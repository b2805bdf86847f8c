// lockstep doctor: the launcher variables (read exactly as init_process_group reads them) and the
// LOCKSTEP_* settings.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "cli/doctor_checks.h"
#include "cli/doctor_verdicts.h"
#include "core/settings_parse.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;

constexpr const char* kLauncherVariables[] = {
    "RANK",        "WORLD_SIZE",   "LOCAL_RANK",   "LOCAL_WORLD_SIZE",     "MASTER_ADDR",
    "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};

constexpr const char* kHowToRun =
    "run the checks the way the job will run, under the launcher:\n"
    "  lockstep run --nproc-per-node N -- lockstep doctor\n"
    "or with the variables each rank will get, e.g.:\n"
    "  MASTER_ADDR=host0 MASTER_PORT=29500 RANK=0 WORLD_SIZE=2 lockstep doctor";

// A non-negative integer variable; -1 when unset or malformed.
int env_int(const EnvLookup& env, const char* name) {
  const std::optional<std::string> v = env(name);
  if (!v || v->empty()) return -1;
  char* end = nullptr;
  const long n = std::strtol(v->c_str(), &end, 10);
  return *end == '\0' && n >= 0 && n < (1 << 30) ? static_cast<int>(n) : -1;
}

void check_settings(Report& report) {
  try {
    const Settings s =
        parse_settings([](const char* name) -> const char* { return std::getenv(name); });
    const char* debug = s.debug == DebugLevel::detail ? "DETAIL"
                        : s.debug == DebugLevel::info ? "INFO"
                                                      : "OFF";
    report.ok("settings", concat("LOCKSTEP_TIMEOUT ", s.timeout.count() / 1000.0,
                                 " s, LOCKSTEP_DEBUG ", debug));
  } catch (const ConfigError& e) {
    report.problem("settings", e.what(),
                   "correct the value, or unset the variable for its default "
                   "(docs/settings.md lists them)");
  }
}

// init_process_group's ConfigError lists the problems, then how to fix them ("Start the job
// with the launcher ..."): split it into the report's text and fix.
void report_rendezvous_error(const std::string& message, Report& report) {
  const size_t fix_at = message.find("\nStart the job");
  if (fix_at == std::string::npos) {
    report.problem("variables", message, "set the variables above for every rank");
    return;
  }
  report.problem("variables", message.substr(0, fix_at), message.substr(fix_at + 1));
}

std::string describe(const Job& job) {
  const EnvRendezvous& rv = job.rendezvous;
  std::string text = concat("rank ", rv.rank, " of ", rv.world_size, " (from ", rv.source, ")");
  if (rv.local_rank >= 0) text += concat(", local rank ", rv.local_rank);
  if (rv.local_world_size > 0) text += concat(" of ", rv.local_world_size, " on this host");
  if (job.nodes > 1) text += concat(", node ", job.node_rank, " of ", job.nodes);
  if (rv.master_addr.empty())
    return text + ", master address from rank 0 over MPI (no MASTER_ADDR)";
  text += concat(", master ", rv.master_addr, ":", rv.master_port);
  if (job.agent_store)
    text += " (store hosted by lockstep run)";
  else if (rv.rank == 0)
    text += " (this rank will host the store)";
  return text;
}

// Consistency beyond what init_process_group rejects outright.
void check_consistency(const Job& job, Report& report) {
  const EnvRendezvous& rv = job.rendezvous;
  // Under mpirun without MASTER_ADDR, rank 0 picks the port and sends it over MPI.
  const bool port_by_mpi = rv.master_addr.empty();
  if (rv.local_world_size > rv.world_size)
    report.problem("variables",
                   concat("LOCAL_WORLD_SIZE=", rv.local_world_size, " is above WORLD_SIZE=",
                          rv.world_size, ": a host cannot run more ranks than the job has"),
                   "set LOCAL_WORLD_SIZE to the number of ranks on this host (lockstep run sets "
                   "both)");
  if (port_by_mpi) return;
  if (rv.master_port == 0 && !job.agent_store && rv.rank != 0)
    report.problem("variables",
                   concat("rank ", rv.rank,
                          " has MASTER_PORT=0, but only the process that hosts "
                          "the store can pick a free port; the others need the real port"),
                   "use `lockstep run --master-port 0`, which picks one and passes it to every "
                   "rank, or set the real port");
  if (rv.master_port == 0 && !job.agent_store && rv.rank == 0 && rv.world_size > 1)
    report.problem("variables",
                   concat("MASTER_PORT=0 with WORLD_SIZE=", rv.world_size,
                          ": rank 0 would pick a free port that the other ranks cannot know"),
                   "use `lockstep run --master-port 0` (it passes the port on), or a fixed port");
}

}  // namespace

Job check_variables(Report& report) {
  Job job;
  const EnvLookup env = process_env();
  for (const char* v : kLauncherVariables) job.launched = job.launched || env(v).has_value();
  job.agent_store = env("LOCKSTEP_STORE_PORT").has_value() ||
                    env("LOCKSTEP_USE_AGENT_STORE").value_or("0") == "1";
  check_settings(report);
  if (!job.launched) {
    report.problem("variables",
                   "none of the launcher's variables is set (RANK, WORLD_SIZE, MASTER_ADDR, "
                   "MASTER_PORT, or Slurm's or Open MPI's), so init_process_group would fail "
                   "here; the checks below assume 1 rank on this host",
                   kHowToRun);
    return job;
  }
  try {
    job.rendezvous = read_rendezvous(InitOptions{}, env);
    job.valid = true;
  } catch (const ConfigError& e) {
    report_rendezvous_error(e.what(), report);
    return job;
  }
  job.world_size = job.rendezvous.world_size;
  const NodeShape shape =
      node_shape(env_int(env, "GROUP_WORLD_SIZE"), env_int(env, "GROUP_RANK"),
                 job.rendezvous.world_size, job.rendezvous.rank, job.rendezvous.local_world_size);
  job.nodes = shape.nodes;
  job.node_rank = shape.node_rank;
  job.local_rank = std::max(0, job.rendezvous.local_rank);
  if (job.rendezvous.local_world_size > 0) job.local_processes = job.rendezvous.local_world_size;
  report.ok("variables", describe(job));
  check_consistency(job, report);
  return job;
}

}  // namespace lockstep::cli::doctor
