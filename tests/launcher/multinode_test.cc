// Test 6 of the launcher issue: two launchers on one host with --nnodes 2 form one world (node 0's
// launcher hosts the store) and run a real collective; plus what multi-node adds: nodes that
// never arrive are named, a failure on one node stops and restarts the other.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "launcher_test_util.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> node_args(int node_rank, int port, const std::vector<std::string>& more) {
  std::vector<std::string> args{"--nnodes",           "2",
                                "--node-rank",        std::to_string(node_rank),
                                "--master-port",      std::to_string(port),
                                "--nproc-per-node",   "2",
                                "--rdzv-timeout",     "30",
                                "--monitor-interval", "0.05"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Runs node 0 and node 1 side by side and returns both results.
std::pair<ProcessResult, ProcessResult> run_two_nodes(
    const std::vector<std::string>& program, const EnvChanges& env = {},
    const std::vector<std::string>& options = {}) {
  int port = free_port();
  std::vector<std::string> more = options;
  more.insert(more.end(), program.begin(), program.end());
  Child node1(lockstep_run(node_args(1, port, more)), env);  // first: it must wait for node 0
  Child node0(lockstep_run(node_args(0, port, more)), env);
  ProcessResult r0 = node0.wait(std::chrono::seconds(60));
  ProcessResult r1 = node1.wait(std::chrono::seconds(60));
  return {r0, r1};
}

TEST(LauncherMultiNode, TwoLaunchersFormOneWorld) {
  auto [r0, r1] = run_two_nodes(
      {"/bin/sh", "-c",
       "echo \"WORLD $RANK $LOCAL_RANK $GROUP_RANK $WORLD_SIZE $MASTER_PORT $LOCKSTEP_RUN_ID "
       "$LOCKSTEP_STORE_PORT $GROUP_WORLD_SIZE\""});
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  std::set<int> ranks;
  std::set<std::string> ports, run_ids;
  std::set<int> stores;
  for (const auto* r : {&r0, &r1}) {
    std::istringstream in(r->output);
    for (std::string line; std::getline(in, line);) {
      int prefix = -1, rank = -1, local = -1, group = -1, world = -1, port = -1, store = -1;
      int nodes = -1;
      char run_id[64] = {0};
      if (std::sscanf(line.c_str(), "[rank%d]: WORLD %d %d %d %d %d %63s %d %d", &prefix, &rank,
                      &local, &group, &world, &port, run_id, &store, &nodes) != 9)
        continue;
      stores.insert(store);
      EXPECT_EQ(nodes, 2) << line;
      EXPECT_EQ(prefix, rank);
      EXPECT_EQ(world, 4);
      EXPECT_EQ(group, r == &r0 ? 0 : 1) << line;
      EXPECT_EQ(rank, group * 2 + local) << line;
      EXPECT_TRUE(ranks.insert(rank).second) << "rank " << rank << " appears twice";
      ports.insert(std::to_string(port));
      run_ids.insert(run_id);
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << r0.output << r1.output;
  EXPECT_EQ(ports.size(), 1u) << "every rank must get node 0's MASTER_PORT";
  EXPECT_EQ(stores.size(), 1u) << "every rank must use node 0's launcher store";
  EXPECT_NE(std::to_string(*stores.begin()), *ports.begin())
      << "MASTER_PORT is free for the script's own store, not the launcher's";
  EXPECT_EQ(run_ids.size(), 1u) << "node 0's run id is the job's";
}

TEST(LauncherMultiNode, TwoLaunchersRunAnAllReduceTogether) {
  auto [r0, r1] = run_two_nodes({test_binary()}, child_mode_env("allreduce"));
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  // sum over ranks of (rank + 1) * 1 = 1 + 2 + 3 + 4.
  for (int rank = 0; rank < 4; ++rank) {
    const ProcessResult& r = rank < 2 ? r0 : r1;
    EXPECT_EQ(count_of(r.output, "[rank" + std::to_string(rank) + "]: ALLREDUCE_OK rank=" +
                                     std::to_string(rank) + " world=4 first=10\n"),
              1u)
        << r.output;
  }
}

TEST(LauncherMultiNode, NodesThatNeverArriveAreNamed) {
  TempDir dir;
  auto r =
      launch({"--nnodes", "3", "--node-rank", "0", "--master-port", std::to_string(free_port()),
              "--rdzv-timeout", "1", "/bin/sh", "-c", "touch " + dir.file("started")});
  EXPECT_EQ(r.process.exit_code, 1) << r.process.output;
  EXPECT_NE(r.process.output.find("node rank(s) 1, 2 of 3 never arrived"), std::string::npos)
      << r.process.output;
  EXPECT_NE(r.process.output.find("--rdzv-timeout"), std::string::npos);
  EXPECT_GE(r.seconds, 1.0);
  EXPECT_LT(r.seconds, 8.0);
  EXPECT_FALSE(file_exists(dir.file("started"))) << "no rank may start without the whole world";
}

// Node 1 started with another secret: node 0 names it (its address and the reason) within the
// refusal grace (src/store/refusals.h), not at --rdzv-timeout.
TEST(LauncherMultiNode, ANodeWithAnotherSecretIsNamedByNodeZero) {
  const int port = free_port();
  std::vector<std::string> args = node_args(0, port, {"/bin/sh", "-c", "echo RANK-RAN"});
  args[std::find(args.begin(), args.end(), "--rdzv-timeout") - args.begin() + 1] = "60";
  std::vector<std::string> args1 = args;
  args1[3] = "1";  // --node-rank 1
  const auto start = std::chrono::steady_clock::now();
  Child node0(lockstep_run(args), {{"LOCKSTEP_SECRET", "secret-a"}});
  Child node1(lockstep_run(args1), {{"LOCKSTEP_SECRET", "secret-b"}});
  const ProcessResult r0 = node0.wait(std::chrono::seconds(90));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ProcessResult r1 = node1.wait(std::chrono::seconds(30));
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  for (const char* part :
       {"node rank(s) 1 of 2 have not arrived", "turned a process away",
        "dropped connection from 127.0.0.1:", "does not know this store's secret", "--secret-file"})
    EXPECT_NE(r0.output.find(part), std::string::npos) << part << "\n" << r0.output;
  EXPECT_LT(took, 15.0) << "node 0 waited for --rdzv-timeout:\n" << r0.output;
  EXPECT_NE(r1.exit_code, 0) << r1.output;
  EXPECT_NE(r1.output.find("secret differs"), std::string::npos) << r1.output;
  EXPECT_EQ(count_of(r0.output + r1.output, "RANK-RAN"), 0u) << "no rank may start";
}

TEST(LauncherMultiNode, NodeWithoutNodeZeroNamesTheStoreAddress) {
  int port = free_port();
  auto r = launch({"--nnodes", "2", "--node-rank", "1", "--master-port", std::to_string(port),
                   "--rdzv-timeout", "1", "/bin/sh", "-c", "echo started"});
  EXPECT_EQ(r.process.exit_code, 1) << r.process.output;
  EXPECT_NE(r.process.output.find("node 1 could not reach node 0's store at 127.0.0.1:" +
                                  std::to_string(port)),
            std::string::npos)
      << r.process.output;
  EXPECT_LT(r.seconds, 8.0);
  EXPECT_EQ(count_of(r.process.output, "started"), 0u);
}

TEST(LauncherMultiNode, SigintWhileWaitingForNodesEndsTheWaitAtOnce) {
  const int port = free_port();
  Child node0(lockstep_run({"--nnodes", "2", "--master-port", std::to_string(port),
                            "--rdzv-timeout", "60", "/bin/sh", "-c", "echo started"}));
  // Node 0 hosts the rendezvous store on --master-port and registers itself there
  // (lockstep_launcher/a0/node/0) right before it waits for node 1: once that key exists, the
  // signal lands in the wait.
  {
    TcpStore store({.host = "127.0.0.1",
                    .port = static_cast<uint16_t>(port),
                    .timeout = std::chrono::seconds(30)});
    store.wait({"lockstep_launcher/a0/node/0"}, std::chrono::seconds(30));
  }
  auto sent = std::chrono::steady_clock::now();
  node0.kill(SIGINT);
  ProcessResult r = node0.wait(std::chrono::seconds(20));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.output;
  EXPECT_LT(seconds, 3.0) << "the rendezvous wait must not hold up a Ctrl-C";
  EXPECT_NE(r.output.find("interrupted by SIGINT while waiting for the other nodes"),
            std::string::npos)
      << r.output;
}

TEST(LauncherMultiNode, PortInUseIsNamed) {
  auto busy = net::listen_tcp("127.0.0.1", 0);
  int port = net::local_port(busy.get());
  auto r = launch({"--master-port", std::to_string(port), "/bin/sh", "-c", "echo started"});
  EXPECT_EQ(r.process.exit_code, 1) << r.process.output;
  EXPECT_NE(r.process.output.find(std::to_string(port)), std::string::npos) << r.process.output;
  EXPECT_EQ(count_of(r.process.output, "started"), 0u);
}

TEST(LauncherMultiNode, FailureOnOneNodeStopsTheOther) {
  auto [r0, r1] =
      run_two_nodes({"/bin/sh", "-c",
                     "if [ \"$RANK\" = 3 ]; then sleep 0.5; echo dying >&2; exit 7; fi; sleep 30"},
                    {}, {"--term-timeout", "2"});
  EXPECT_EQ(r1.exit_code, 7) << r1.output;
  EXPECT_NE(summary_of(r1.output).find("rank:       3 (local rank 1)"), std::string::npos)
      << r1.output;
  EXPECT_EQ(r0.exit_code, 7) << "node 0 exits with the root cause's code\n" << r0.output;
  EXPECT_NE(r0.output.find("root cause: node 1 failed: rank 3 (local rank 1) exited with code 7"),
            std::string::npos)
      << r0.output;
  EXPECT_EQ(count_of(r0.output, "after the launcher stopped it"), 2u) << r0.output;
}

TEST(LauncherMultiNode, SigtermToOneLauncherEndsTheJobWithoutRestarts) {
  TempDir dir;
  int port = free_port();
  auto more =
      std::vector<std::string>{"--max-restarts", "3", "/bin/sh", "-c",
                               "echo $$ > " + dir.path() + "/pid_$RANK.tmp; mv " + dir.path() +
                                   "/pid_$RANK.tmp " + dir.path() + "/pid_$RANK; exec sleep 30"};
  Child node1(lockstep_run(node_args(1, port, more)));
  Child node0(lockstep_run(node_args(0, port, more)));
  std::vector<std::string> files;
  for (int r = 0; r < 4; ++r) files.push_back(dir.file("pid_" + std::to_string(r)));
  auto pids = wait_for_pid_files(files, std::chrono::seconds(20));
  auto sent = std::chrono::steady_clock::now();
  node1.kill(SIGTERM);
  ProcessResult r1 = node1.wait(std::chrono::seconds(20));
  ProcessResult r0 = node0.wait(std::chrono::seconds(20));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(r1.exit_code, 128 + SIGTERM) << r1.output;
  EXPECT_EQ(r0.exit_code, 128 + SIGTERM) << r0.output;
  EXPECT_LT(seconds, 5.0);
  EXPECT_NE(r0.output.find("root cause: node 1 failed: interrupted by SIGTERM"), std::string::npos)
      << r0.output;
  EXPECT_EQ(count_of(r0.output + r1.output, "restarting"), 0u)
      << "a signal is not a failure to retry";
  auto alive = still_alive_after(pids, std::chrono::seconds(2));
  EXPECT_TRUE(alive.empty());
  kill_all(alive);
}

TEST(LauncherMultiNode, BothNodesRestartTogether) {
  auto [r0, r1] = run_two_nodes(
      {"/bin/sh", "-c",
       "echo \"try $LOCKSTEP_RESTART_COUNT\"; "
       "if [ \"$LOCKSTEP_RESTART_COUNT\" = 0 ]; then [ \"$RANK\" = 2 ] && exit 4; sleep 30; fi"},
      {}, {"--max-restarts", "1"});
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  for (int rank = 0; rank < 4; ++rank) {
    const ProcessResult& r = rank < 2 ? r0 : r1;
    EXPECT_EQ(count_of(r.output, "[rank" + std::to_string(rank) + "]: try 1\n"), 1u) << r.output;
  }
  EXPECT_NE(r0.output.find("attempt 0: node 1 failed: rank 2 (local rank 0) exited with code 4"),
            std::string::npos)
      << r0.output;
}

}  // namespace
}  // namespace lockstep::testing
