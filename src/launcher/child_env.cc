#include "launcher/child_env.h"

#include <algorithm>
#include <set>

namespace lockstep::launcher {

std::vector<std::string> child_environment(const RankPlacement& placement,
                                           const JobEnvironment& job, char* const* base) {
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(placement.rank)},
      {"LOCAL_RANK", std::to_string(placement.local_rank)},
      {"WORLD_SIZE", std::to_string(placement.world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(placement.local_world_size)},
      {"GROUP_RANK", std::to_string(placement.group_rank)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"LOCKSTEP_RESTART_COUNT", std::to_string(job.restart_count)},
      {"LOCKSTEP_MAX_RESTARTS", std::to_string(job.max_restarts)},
      {"LOCKSTEP_RUN_ID", job.run_id},
      {"LOCKSTEP_USE_AGENT_STORE", "1"},
  };
  if (job.omp_num_threads)
    ours.emplace_back("OMP_NUM_THREADS", std::to_string(*job.omp_num_threads));
  std::set<std::string> replaced;
  for (const auto& [name, value] : ours) replaced.insert(name);

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
