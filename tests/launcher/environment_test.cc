// Test 1 of the launcher issue: the environment each rank sees (lockstep's and every variable
// torchrun gives a worker), and that the store the launcher hosts at LOCKSTEP_STORE_PORT serves
// the ranks as plain clients while MASTER_PORT is left free for the script's own store.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

// Prints every variable the launcher sets, as NAME=value words on one line.
const char* kPrintEnv =
    "echo ENV RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
    "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR "
    "MASTER_PORT=$MASTER_PORT LOCKSTEP_RESTART_COUNT=$LOCKSTEP_RESTART_COUNT "
    "LOCKSTEP_MAX_RESTARTS=$LOCKSTEP_MAX_RESTARTS LOCKSTEP_RUN_ID=$LOCKSTEP_RUN_ID "
    "LOCKSTEP_USE_AGENT_STORE=$LOCKSTEP_USE_AGENT_STORE OMP_NUM_THREADS=$OMP_NUM_THREADS "
    "LOCKSTEP_STORE_ADDR=$LOCKSTEP_STORE_ADDR LOCKSTEP_STORE_PORT=$LOCKSTEP_STORE_PORT "
    "GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE ROLE_RANK=$ROLE_RANK ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE "
    "ROLE_NAME=$ROLE_NAME TORCHELASTIC_RESTART_COUNT=$TORCHELASTIC_RESTART_COUNT "
    "TORCHELASTIC_MAX_RESTARTS=$TORCHELASTIC_MAX_RESTARTS "
    "TORCHELASTIC_RUN_ID=$TORCHELASTIC_RUN_ID "
    "TORCHELASTIC_USE_AGENT_STORE=$TORCHELASTIC_USE_AGENT_STORE "
    "TORCHELASTIC_ERROR_FILE=$TORCHELASTIC_ERROR_FILE "
    "NCCL_ASYNC_ERROR_HANDLING=$NCCL_ASYNC_ERROR_HANDLING "
    "TORCH_NCCL_ASYNC_ERROR_HANDLING=$TORCH_NCCL_ASYNC_ERROR_HANDLING";

using Vars = std::map<std::string, std::string>;

// rank (from the [rankN] prefix) -> the variables that rank printed.
std::map<int, Vars> env_by_rank(const std::string& output) {
  std::map<int, Vars> result;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    int rank = -1;
    if (std::sscanf(line.c_str(), "[rank%d]: ENV", &rank) != 1) continue;
    std::istringstream words(line.substr(line.find("ENV ") + 4));
    for (std::string word; words >> word;) {
      auto eq = word.find('=');
      result[rank][word.substr(0, eq)] = word.substr(eq + 1);
    }
  }
  return result;
}

int cores() {
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  return CPU_COUNT(&set);
}

TEST(LauncherEnvironment, EveryRankGetsItsPlaceInTheJob) {
  auto r = launch(
      {"--standalone", "--nproc-per-node", "3", "--max-restarts", "2", "/bin/sh", "-c", kPrintEnv},
      {{"OMP_NUM_THREADS", std::nullopt}, {"RANK", "99"}});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  auto ranks = env_by_rank(r.process.output);
  ASSERT_EQ(ranks.size(), 3u) << r.process.output;
  std::string run_id = ranks[0]["LOCKSTEP_RUN_ID"], port = ranks[0]["MASTER_PORT"];
  std::string store_port = ranks[0]["LOCKSTEP_STORE_PORT"];
  EXPECT_FALSE(run_id.empty());
  EXPECT_GT(std::stoi(port), 0);
  EXPECT_LT(std::stoi(port), 65536);
  EXPECT_GT(std::stoi(store_port), 0);
  EXPECT_NE(port, store_port) << "MASTER_PORT is for the script's own store, not the launcher's";
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  EXPECT_LT(std::stoi(port), ephemeral_low)
      << "MASTER_PORT comes from below the ephemeral range, so no port-0 socket can take it first";
  std::set<std::string> error_files;
  for (int rank = 0; rank < 3; ++rank) {
    Vars& v = ranks[rank];
    EXPECT_EQ(v["RANK"], std::to_string(rank)) << "the launcher must override an inherited RANK";
    EXPECT_EQ(v["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(v["WORLD_SIZE"], "3");
    EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(v["GROUP_RANK"], "0");
    EXPECT_EQ(v["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(v["MASTER_PORT"], port);
    EXPECT_EQ(v["LOCKSTEP_RESTART_COUNT"], "0");
    EXPECT_EQ(v["LOCKSTEP_MAX_RESTARTS"], "2");
    EXPECT_EQ(v["LOCKSTEP_RUN_ID"], run_id);
    EXPECT_EQ(v["LOCKSTEP_USE_AGENT_STORE"], "1");
    EXPECT_EQ(v["OMP_NUM_THREADS"], std::to_string(std::max(1, cores() / 3)));
    EXPECT_EQ(v["LOCKSTEP_STORE_ADDR"], "127.0.0.1");
    EXPECT_EQ(v["LOCKSTEP_STORE_PORT"], store_port);
    // torchrun's (LocalElasticAgent._start_workers, one role named "default").
    EXPECT_EQ(v["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(v["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(v["ROLE_WORLD_SIZE"], "3");
    EXPECT_EQ(v["ROLE_NAME"], "default");
    EXPECT_EQ(v["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(v["TORCHELASTIC_MAX_RESTARTS"], "2");
    EXPECT_EQ(v["TORCHELASTIC_RUN_ID"], run_id);
    EXPECT_EQ(v["TORCHELASTIC_USE_AGENT_STORE"], "False") << "rank 0 hosts torch's store";
    EXPECT_EQ(v["NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_EQ(v["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_NE(v["TORCHELASTIC_ERROR_FILE"].find("/attempt_0/rank_" + std::to_string(rank)),
              std::string::npos)
        << v["TORCHELASTIC_ERROR_FILE"];
    error_files.insert(v["TORCHELASTIC_ERROR_FILE"]);
  }
  EXPECT_EQ(error_files.size(), 3u) << "one error file per rank";
  EXPECT_FALSE(file_exists(*error_files.begin())) << "nothing wrote it: the launcher only names it";
  EXPECT_EQ(count_of(r.process.output, "OMP_NUM_THREADS is not set"), 1u) << r.process.output;
}

TEST(LauncherEnvironment, KeepsOmpNumThreadsAndRunIdGivenByTheUser) {
  auto r = launch(
      {"--standalone", "--nproc-per-node", "2", "--run-id", "job42", "/bin/sh", "-c", kPrintEnv},
      {{"OMP_NUM_THREADS", "7"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  auto ranks = env_by_rank(r.process.output);
  ASSERT_EQ(ranks.size(), 2u) << r.process.output;
  for (auto& [rank, v] : ranks) {
    EXPECT_EQ(v["OMP_NUM_THREADS"], "7");
    EXPECT_EQ(v["LOCKSTEP_RUN_ID"], "job42");
    EXPECT_EQ(v["TORCHELASTIC_RUN_ID"], "job42");
    EXPECT_EQ(v["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0") << "the user's value stays";
  }
  EXPECT_EQ(count_of(r.process.output, "OMP_NUM_THREADS"), 2u) << "no note when the user set it";
}

TEST(LauncherEnvironment, RanksAreClientsOfTheStoreTheLauncherHosts) {
  auto r =
      launch({"--standalone", "--nproc-per-node", "3", test_binary()}, child_mode_env("store"));
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(count_of(r.process.output, "[rank" + std::to_string(rank) + "]: STORE_OK rank=" +
                                             std::to_string(rank) + " world=3"),
              1u)
        << r.process.output;
}

}  // namespace
}  // namespace lockstep::testing
