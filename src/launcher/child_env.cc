#include "launcher/child_env.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace lockstep::launcher {
namespace {

// The value of NAME in base, if set.
std::optional<std::string> inherited(char* const* base, const std::string& name) {
  for (char* const* e = base; e && *e; ++e)
    if (std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=')
      return std::string(*e + name.size() + 1);
  return std::nullopt;
}

}  // namespace

std::vector<std::string> child_environment(const RankPlacement& placement,
                                           const JobEnvironment& job, char* const* base) {
  std::string restarts = std::to_string(job.restart_count);
  std::string max_restarts = std::to_string(job.max_restarts);
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(placement.rank)},
      {"LOCAL_RANK", std::to_string(placement.local_rank)},
      {"WORLD_SIZE", std::to_string(placement.world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(placement.local_world_size)},
      {"GROUP_RANK", std::to_string(placement.group_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(placement.group_world_size)},
      {"ROLE_RANK", std::to_string(placement.rank)},
      {"ROLE_WORLD_SIZE", std::to_string(placement.world_size)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", restarts},
      {"TORCHELASTIC_MAX_RESTARTS", max_restarts},
      {"TORCHELASTIC_RUN_ID", job.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"NCCL_ASYNC_ERROR_HANDLING", inherited(base, "NCCL_ASYNC_ERROR_HANDLING").value_or("1")},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING",
       inherited(base, "TORCH_NCCL_ASYNC_ERROR_HANDLING").value_or("1")},
      {"LOCKSTEP_STORE_ADDR", job.master_addr},
      {"LOCKSTEP_STORE_PORT", std::to_string(job.store_port)},
      {"LOCKSTEP_USE_AGENT_STORE", "1"},
      // The attempt, not the restarts after failures: lockstep's env:// scopes the ranks' keys
      // in the launcher's store by it (src/group/attempt_scope.h), so an elastic job's restart
      // for a membership change, which TORCHELASTIC_RESTART_COUNT does not count, must still get
      // a key space of its own (else its ranks meet the last attempt's keys: its world size).
      {"LOCKSTEP_RESTART_COUNT", std::to_string(job.attempt)},
      {"LOCKSTEP_MAX_RESTARTS", max_restarts},
      {"LOCKSTEP_RUN_ID", job.run_id},
      {"LOCKSTEP_ATTEMPT", std::to_string(job.attempt)},
  };
  if (!placement.error_file.empty())
    ours.emplace_back("TORCHELASTIC_ERROR_FILE", placement.error_file);
  // Through the environment only: a command line shows in ps and /proc/<pid>/cmdline to anyone.
  if (!job.secret.empty()) ours.emplace_back("LOCKSTEP_SECRET", job.secret);
  if (!job.bind_addr.empty()) ours.emplace_back("LOCKSTEP_BIND_ADDR", job.bind_addr);
  if (job.omp_num_threads)
    ours.emplace_back("OMP_NUM_THREADS", std::to_string(*job.omp_num_threads));
  std::set<std::string> replaced;
  for (const auto& [name, value] : ours) replaced.insert(name);
  replaced.insert("TORCHELASTIC_ERROR_FILE");  // never a stale one from the launcher's caller

  std::vector<std::string> env;
  for (char* const* e = base; e && *e; ++e) {
    std::string entry = *e;
    if (!replaced.count(entry.substr(0, entry.find('=')))) env.push_back(std::move(entry));
  }
  for (const auto& [name, value] : ours) env.push_back(name + "=" + value);
  return env;
}

int default_omp_threads(int cores, int local_processes) {
  return std::max(1, cores / std::max(1, local_processes));
}

}  // namespace lockstep::launcher
