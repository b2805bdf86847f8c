// Elastic jobs (`lockstep run --nnodes MIN:MAX`): several launchers on 127.0.0.1 form, lose and
// gain nodes. The ranks are shell commands that print their environment; the tests read the world
// each attempt had from those lines, never from the launcher's own words alone.
#include <gtest/gtest.h>

#include <signal.h>

#include <set>
#include <sstream>
#include <thread>

#include "launcher_test_util.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"

namespace lockstep::testing {
namespace {

using std::chrono::seconds;

// One rank's "ENV ..." line.
struct RankEnv {
  int attempt = -1, rank = -1, local_rank = -1, world = -1, group_rank = -1, group_world = -1;
  int role_world = -1, restarts = -1, max_restarts = -1;
};

constexpr const char* kPrintEnv =
    "echo \"ENV $LOCKSTEP_ATTEMPT $RANK $LOCAL_RANK $WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE "
    "$ROLE_WORLD_SIZE $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS\"";

std::vector<RankEnv> rank_envs(const std::string& output) {
  std::vector<RankEnv> envs;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    RankEnv e;
    int prefix = -1;
    if (std::sscanf(line.c_str(), "[rank%d]: ENV %d %d %d %d %d %d %d %d %d", &prefix, &e.attempt,
                    &e.rank, &e.local_rank, &e.world, &e.group_rank, &e.group_world, &e.role_world,
                    &e.restarts, &e.max_restarts) == 10)
      envs.push_back(e);
  }
  return envs;
}

std::vector<std::string> elastic_args(const std::string& nnodes, int port,
                                      const std::vector<std::string>& more) {
  std::vector<std::string> args{
      "--nnodes",           nnodes, "--master-port",  std::to_string(port),
      "--nproc-per-node",   "2",    "--rdzv-timeout", "30",
      "--monitor-interval", "0.05", "--term-timeout", "2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Waits until the launcher hosting the store on `port` has opened its first round (so that it,
// not a launcher started later, is the host and node 0).
void wait_for_host(int port) {
  TcpStore store(
      {.host = "127.0.0.1", .port = static_cast<uint16_t>(port), .timeout = seconds(30)});
  store.wait({"lockstep_launcher/elastic/round"}, seconds(30));
}

void wait_for_files(const std::vector<std::string>& paths, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& path : paths)
    while (!file_exists(path) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const auto& path : paths) ASSERT_TRUE(file_exists(path)) << path << " never appeared";
}

TEST(LauncherElastic, OneNodeOfOneToTwoStartsAfterTheLastCall) {
  auto r = launch(
      elastic_args("1:2", free_port(), {"--rdzv-last-call", "1.5", "/bin/sh", "-c", kPrintEnv}));
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  auto envs = rank_envs(r.process.output);
  ASSERT_EQ(envs.size(), 2u) << r.process.output;
  std::set<int> ranks;
  for (const auto& e : envs) {
    EXPECT_EQ(e.world, 2) << "WORLD_SIZE is one node's ranks";
    EXPECT_EQ(e.role_world, 2);
    EXPECT_EQ(e.group_world, 1);
    EXPECT_EQ(e.group_rank, 0);
    EXPECT_EQ(e.attempt, 0);
    EXPECT_EQ(e.restarts, 0);
    ranks.insert(e.rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_GE(r.seconds, 1.5) << "the round closes only once the last call has passed";
  EXPECT_NE(r.process.output.find("attempt 0: world size 2 on 1 node(s)"), std::string::npos)
      << r.process.output;
}

TEST(LauncherElastic, TwoNodesOfOneToThreeStartTogether) {
  const int port = free_port();
  auto more = std::vector<std::string>{"--rdzv-last-call", "3", "/bin/sh", "-c", kPrintEnv};
  Child first(lockstep_run(elastic_args("1:3", port, more)));
  Child second(lockstep_run(elastic_args("1:3", port, more)));
  ProcessResult a = first.wait(seconds(60));
  ProcessResult b = second.wait(seconds(60));
  ASSERT_EQ(a.exit_code, 0) << a.output << "\n--- the other node:\n" << b.output;
  ASSERT_EQ(b.exit_code, 0) << b.output << "\n--- the other node:\n" << a.output;
  std::set<int> ranks, group_ranks;
  for (const auto* r : {&a, &b}) {
    auto envs = rank_envs(r->output);
    ASSERT_EQ(envs.size(), 2u) << r->output;
    for (const auto& e : envs) {
      EXPECT_EQ(e.world, 4) << r->output;
      EXPECT_EQ(e.group_world, 2);
      EXPECT_EQ(e.attempt, 0) << "both nodes are in the first round";
      EXPECT_EQ(e.rank, e.group_rank * 2 + e.local_rank) << "ranks are contiguous per node";
      EXPECT_TRUE(ranks.insert(e.rank).second) << "rank " << e.rank << " appears twice";
      group_ranks.insert(e.group_rank);
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(group_ranks, (std::set<int>{0, 1}));
}

// Node B of a 1:2 job goes away while the world of 4 runs (its launcher is killed, or told to
// stop); node A, which hosts the store, re-forms alone and finishes with WORLD_SIZE 2.
void survivor_finishes_alone(int sig, const std::string& named_part) {
  TempDir dir;
  const int port = free_port();
  // World 4: record the pid, then wait to be stopped. World 2: print and succeed.
  const std::string script = std::string("if [ \"$WORLD_SIZE\" = 4 ]; then echo $$ > ") +
                             dir.path() + "/pid_$RANK.tmp; mv " + dir.path() + "/pid_$RANK.tmp " +
                             dir.path() + "/pid_$RANK; exec sleep 30; fi; " + kPrintEnv;
  auto more = std::vector<std::string>{"--rdzv-last-call",
                                       "3",
                                       "--rdzv-keep-alive",
                                       "1.5",
                                       "--max-restarts",
                                       "1",
                                       "/bin/sh",
                                       "-c",
                                       script};
  Child a(lockstep_run(elastic_args("1:2", port, more)));
  wait_for_host(port);
  Child b(lockstep_run(elastic_args("1:2", port, more)));
  std::vector<std::string> files;
  for (int r = 0; r < 4; ++r) files.push_back(dir.file("pid_" + std::to_string(r)));
  auto pids = wait_for_pid_files(files, seconds(30));
  const pid_t b_pid = b.pid();
  const std::string named = named_part == "lease"
                                ? "node 1 (" + net::hostname() + ", launcher pid " +
                                      std::to_string(b_pid) +
                                      ") is gone: its launcher has not renewed its lease"
                                : named_part;
  b.kill(sig);
  ProcessResult rb = b.wait(seconds(20));
  ProcessResult ra = a.wait(seconds(30));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  auto envs = rank_envs(ra.output);
  ASSERT_EQ(envs.size(), 2u) << ra.output;
  for (const auto& e : envs) {
    EXPECT_EQ(e.world, 2) << "the survivor's world is its own ranks";
    EXPECT_EQ(e.group_world, 1);
    EXPECT_EQ(e.group_rank, 0);
    EXPECT_EQ(e.attempt, 1);
    EXPECT_EQ(e.restarts, 1) << "losing a node is a failure: it counts against --max-restarts";
    EXPECT_EQ(e.max_restarts, 1);
  }
  const std::string b_name =
      "node 1 (" + net::hostname() + ", launcher pid " + std::to_string(b_pid) + ")";
  EXPECT_NE(ra.output.find(named), std::string::npos) << ra.output;
  EXPECT_NE(ra.output.find("attempt 1 goes on without " + b_name + " of attempt 0: it is gone"),
            std::string::npos)
      << ra.output;
  EXPECT_NE(ra.output.find("attempt 1: world size 2 on 1 node(s)"), std::string::npos) << ra.output;
  if (sig == SIGTERM) {
    EXPECT_EQ(rb.exit_code, 128 + SIGTERM) << rb.output;
  }
  auto alive = still_alive_after(pids, seconds(5));
  EXPECT_TRUE(alive.empty()) << "every rank of the world of 4 must be gone";
  kill_all(alive);
}

TEST(LauncherElastic, SurvivorReformsWhenANodesLauncherIsKilled) {
  survivor_finishes_alone(SIGKILL, "lease");
}

TEST(LauncherElastic, SurvivorReformsWhenANodeLeaves) {
  survivor_finishes_alone(SIGTERM,
                          "node 1 failed: left the job: its launcher was interrupted by SIGTERM");
}

// A 1:2 job runs on node A alone; node B arrives. A's ranks are stopped, and the next attempt
// has both nodes. --max-restarts 0: a membership change is not a failure.
TEST(LauncherElastic, ArrivingNodeIsAdmittedAtTheNextRestart) {
  TempDir dir;
  const int port = free_port();
  const std::string script = std::string("if [ \"$WORLD_SIZE\" = 2 ]; then touch ") + dir.path() +
                             "/alone_$RANK; exec sleep 30; fi; " + kPrintEnv;
  auto more = std::vector<std::string>{
      "--rdzv-last-call", "0.5", "--max-restarts", "0", "/bin/sh", "-c", script};
  Child a(lockstep_run(elastic_args("1:2", port, more)));
  wait_for_files({dir.file("alone_0"), dir.file("alone_1")}, seconds(30));
  Child b(lockstep_run(elastic_args("1:2", port, more)));
  ProcessResult rb = b.wait(seconds(30));
  ProcessResult ra = a.wait(seconds(30));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(ra.output.find("attempt 0 ended for a membership change (1 node(s) waiting to join); "
                           "re-forming the job (not counted against --max-restarts)"),
            std::string::npos)
      << ra.output;
  std::set<int> ranks;
  for (const auto* r : {&ra, &rb}) {
    auto envs = rank_envs(r->output);
    ASSERT_EQ(envs.size(), 2u) << r->output;
    for (const auto& e : envs) {
      EXPECT_EQ(e.world, 4) << r->output;
      EXPECT_EQ(e.group_world, 2);
      EXPECT_EQ(e.group_rank, r == &ra ? 0 : 1) << "the store's host is node 0";
      EXPECT_EQ(e.attempt, 1);
      EXPECT_EQ(e.restarts, 0) << "TORCHELASTIC_RESTART_COUNT counts failures only";
      ranks.insert(e.rank);
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(count_of(rb.output, "ENV 0 "), 0u) << "B never ran in attempt 0";
}

// As above, with ranks that meet in the launcher's store (init_process_group and an all_reduce):
// the attempt after a membership change needs a key space of its own there, although
// TORCHELASTIC_RESTART_COUNT does not grow. Sharing attempt 0's, the ranks of the world of 4 met
// its world size key (2) and failed at once.
TEST(LauncherElastic, RanksOfTheAttemptAfterAMembershipChangeMeetInAFreshKeySpace) {
  TempDir dir;
  const int port = free_port();
  // $0 is this test binary, a rank in allreduce mode (child_mode_test.cc).
  const std::string script = std::string(
                                 "echo \"COUNTS $LOCKSTEP_ATTEMPT $LOCKSTEP_RESTART_COUNT "
                                 "$TORCHELASTIC_RESTART_COUNT\"; \"$0\" || exit $?; "
                                 "if [ \"$WORLD_SIZE\" = 2 ]; then touch ") +
                             dir.path() + "/alone_$RANK; exec sleep 30; fi";
  auto more = std::vector<std::string>{"--rdzv-last-call", "0.5", "--max-restarts", "0",
                                       "/bin/sh",          "-c",  script,           test_binary()};
  const EnvChanges env = child_mode_env("allreduce");
  Child a(lockstep_run(elastic_args("1:2", port, more)), env);
  wait_for_files({dir.file("alone_0"), dir.file("alone_1")}, seconds(30));
  Child b(lockstep_run(elastic_args("1:2", port, more)), env);
  ProcessResult rb = b.wait(seconds(60));
  ProcessResult ra = a.wait(seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(ra.output.find("attempt 0 ended for a membership change"), std::string::npos)
      << ra.output;
  EXPECT_EQ(count_of(ra.output, "ALLREDUCE_OK rank=0 world=2 "), 1u) << ra.output;
  EXPECT_EQ(count_of(ra.output, "ALLREDUCE_OK rank=1 world=2 "), 1u) << ra.output;
  for (const char* line : {"ALLREDUCE_OK rank=0 world=4 first=10", "ALLREDUCE_OK rank=1 world=4 "})
    EXPECT_EQ(count_of(ra.output, line), 1u) << line << "\n" << ra.output;
  for (const char* line : {"ALLREDUCE_OK rank=2 world=4 ", "ALLREDUCE_OK rank=3 world=4 "})
    EXPECT_EQ(count_of(rb.output, line), 1u) << line << "\n" << rb.output;
  // Attempt 1: LOCKSTEP_ATTEMPT and LOCKSTEP_RESTART_COUNT (the key space) 1, no restart counted.
  EXPECT_EQ(count_of(ra.output, "COUNTS 0 0 0\n"), 2u) << ra.output;
  EXPECT_EQ(count_of(ra.output + rb.output, "COUNTS 1 1 0\n"), 4u) << ra.output << rb.output;
}

// A node that finds the job full (MAX nodes) waits to be admitted, and gives up at
// --rdzv-timeout with a message that says why; the job itself is not disturbed.
TEST(LauncherElastic, NodeBeyondMaxWaitsAndTimesOutClearly) {
  TempDir dir;
  const int port = free_port();
  const std::string script =
      std::string("touch ") + dir.path() + "/running_$RANK; sleep 3; " + kPrintEnv;
  Child a(lockstep_run(
      elastic_args("1:1", port, {"--rdzv-last-call", "0.2", "/bin/sh", "-c", script})));
  wait_for_files({dir.file("running_0")}, seconds(30));
  auto extra = elastic_args("1:1", port, {"/bin/sh", "-c", "echo admitted"});
  extra[7] = "1";  // --rdzv-timeout 1
  auto rb = launch(extra);
  ProcessResult ra = a.wait(seconds(30));
  EXPECT_EQ(rb.process.exit_code, 1) << rb.process.output;
  EXPECT_NE(rb.process.output.find("this node was never admitted"), std::string::npos)
      << rb.process.output;
  EXPECT_EQ(count_of(rb.process.output, "admitted\n"), 0u);
  EXPECT_LT(rb.seconds, 8.0);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  for (const auto& e : rank_envs(ra.output)) EXPECT_EQ(e.attempt, 0) << "no restart for it";
}

}  // namespace
}  // namespace lockstep::testing
