// init_process_group in real processes: env:// across processes, named errors for a broken
// environment, a port in use, an unreachable master and a rank that never joins; tcp:// and
// file:// init methods.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "comm/group_config.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "support/child_mode.h"
#include "support/spawn.h"
#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;

// Child entry: joins via env://, all_reduces, checks the closed form, reports on stdout.
TEST(InitChild, DISABLED_Main) {
  try {
    auto pg = init_process_group();
    std::vector<float> x(1000, static_cast<float>(pg->rank() + 1));
    pg->all_reduce(view(x))->wait();
    float want = pg->size() * (pg->size() + 1) / 2.0f;
    for (float v : x)
      if (v != want) {
        std::printf("CHILD WRONG %f != %f\n", v, want);
        std::fflush(stdout);
        ::_exit(4);
      }
    // The ranks on this host reach the backends (their wait policies) through the config.
    std::printf("CHILD OK rank %d of %d, %d on this host\n", pg->rank(), pg->size(),
                pg->config().local_world_size);
  } catch (const std::exception& e) {
    std::printf("CHILD ERROR %s\n", e.what());
    std::fflush(stdout);
    ::_exit(3);
  }
  std::fflush(stdout);
}

Env rank_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"LOCKSTEP_TIMEOUT", "30"},
          {"LOCKSTEP_USE_AGENT_STORE", std::nullopt},
          {"LOCKSTEP_RESTART_COUNT", std::nullopt}};
}

TEST(InitProcess, EnvInitAcrossThreeProcesses) {
  int port = free_port();
  std::vector<Child> children;
  for (int r = 0; r < 3; ++r) {
    Env env = rank_env(r, 3, port);
    env["LOCAL_WORLD_SIZE"] = "3";
    children.emplace_back(child_argv("InitChild.DISABLED_Main"), env);
  }
  for (int r = 0; r < 3; ++r) {
    auto result = children[static_cast<size_t>(r)].wait(std::chrono::seconds(60));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("CHILD OK rank " + std::to_string(r) + " of 3, 3 on this host"),
              std::string::npos)
        << result.output;
  }
}

TEST(InitProcess, MissingEnvironmentIsNamed) {
  auto result =
      run_process(child_argv("InitChild.DISABLED_Main"), {{"RANK", std::nullopt},
                                                          {"WORLD_SIZE", std::nullopt},
                                                          {"MASTER_ADDR", std::nullopt},
                                                          {"MASTER_PORT", "abc"},
                                                          {"SLURM_PROCID", std::nullopt},
                                                          {"OMPI_COMM_WORLD_RANK", std::nullopt}});
  EXPECT_EQ(result.exit_code, 3) << result.output;
  for (const char* part : {"CHILD ERROR", "RANK is not set", "WORLD_SIZE is not set",
                           "MASTER_ADDR is not set", "MASTER_PORT='abc'", "lockstep run"})
    EXPECT_NE(result.output.find(part), std::string::npos)
        << "no '" << part << "' in " << result.output;
}

TEST(InitProcess, PortInUseIsNamed) {
  auto taken = net::listen_tcp("0.0.0.0", 0);
  int port = net::local_port(taken.get());
  auto result = run_process(child_argv("InitChild.DISABLED_Main"), rank_env(0, 1, port));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("port " + std::to_string(port) + " is already in use"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("--master-port"), std::string::npos) << result.output;
}

TEST(InitProcess, UnreachableMasterNamesAddressAndLastError) {
  int port = free_port();  // nothing listens here
  Env env = rank_env(1, 2, port);
  env["LOCKSTEP_TIMEOUT"] = "1.5";
  auto started = Clock::now();
  auto result = run_process(child_argv("InitChild.DISABLED_Main"), env);
  auto elapsed = Clock::now() - started;
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("Connection refused"), std::string::npos) << result.output;
  // It retries until LOCKSTEP_TIMEOUT (1.5 s) has passed, not less, and gives up soon after.
  EXPECT_GE(elapsed, std::chrono::milliseconds(1500 - 50));
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500 + 5000));
}

TEST(InitProcess, RankThatNeverJoinsIsNamed) {
  int port = free_port();
  Env env = rank_env(0, 3, port);
  env["LOCKSTEP_TIMEOUT"] = "2";
  Child rank0(child_argv("InitChild.DISABLED_Main"), env);
  Child rank2(child_argv("InitChild.DISABLED_Main"), [&] {
    Env e = rank_env(2, 3, port);
    e["LOCKSTEP_TIMEOUT"] = "2";
    return e;
  }());
  auto r0 = rank0.wait(std::chrono::seconds(30));
  auto r2 = rank2.wait(std::chrono::seconds(30));
  EXPECT_EQ(r0.exit_code, 3) << r0.output;
  EXPECT_NE(r0.output.find("ranks [1] of 3 never joined"), std::string::npos) << r0.output;
  EXPECT_EQ(r2.exit_code, 3) << r2.output;
}

TEST(InitProcess, DuplicateRankIsNamed) {
  int port = free_port();
  Env env = rank_env(0, 2, port);
  // The first rank 0 hosts the store and waits there for rank 1, which never comes: long enough
  // for the duplicate to start and be refused on a loaded machine. The test kills it at the end.
  env["LOCKSTEP_TIMEOUT"] = "60";
  Child a(child_argv("InitChild.DISABLED_Main"), env);
  // The duplicate must come after the first has claimed rank 0: wait for its claim in its store.
  {
    TcpStore store({.host = "127.0.0.1",
                    .port = static_cast<uint16_t>(port),
                    .timeout = std::chrono::seconds(30)});
    store.wait({"default/init/rank/0"}, std::chrono::seconds(30));
  }
  Env dup = rank_env(0, 2, port);
  dup["LOCKSTEP_USE_AGENT_STORE"] = "1";  // a plain client that also claims rank 0
  dup["LOCKSTEP_TIMEOUT"] = "3";
  auto second = run_process(child_argv("InitChild.DISABLED_Main"), dup);
  EXPECT_EQ(second.exit_code, 3) << second.output;
  EXPECT_NE(second.output.find("rank 0 joined twice"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("pid " + std::to_string(a.pid())), std::string::npos)
      << "the error names the process that holds rank 0\n"
      << second.output;
}

TEST(InitMethods, TcpUrlWithThreads) {
  int port = free_port();
  spawn(3, [&](int rank) {
    auto pg = init_process_group({.init_method = "tcp://127.0.0.1:" + std::to_string(port),
                                  .rank = rank,
                                  .world_size = 3,
                                  .timeout = std::chrono::seconds(30)});
    std::vector<int64_t> x(10, rank);
    pg->all_reduce(view(x), {.op = ReduceOp::max})->wait();
    for (auto v : x) EXPECT_EQ(v, 2);
  });
}

TEST(InitMethods, FileUrlWithThreads) {
  auto path =
      std::filesystem::temp_directory_path() / ("lockstep-init-" + std::to_string(::getpid()));
  spawn(2, [&](int rank) {
    auto pg = init_process_group({.init_method = "file://" + path.string(),
                                  .rank = rank,
                                  .world_size = 2,
                                  .timeout = std::chrono::seconds(30)});
    std::vector<double> x(3, 1.5);
    pg->all_reduce(view(x))->wait();
    for (auto v : x) EXPECT_EQ(v, 3.0);
  });
  EXPECT_FALSE(std::filesystem::exists(path)) << "the FileStore's file is left behind";
}

}  // namespace
}  // namespace lockstep::testing
