// `lockstep doctor` across nodes: two real launchers (`lockstep run --nnodes 2`) on this host,
// each running the doctor, meet in node 0's store: every node's advertised address is connected
// to from the other node, and node 0 reads node 1's clock. A node that advertises an address
// nothing answers (TEST-NET-1) is reported unreachable, named, within a bounded time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

EnvChanges base_environment() {
  EnvChanges env;
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                        "MASTER_PORT", "GROUP_RANK", "GROUP_WORLD_SIZE", "LOCKSTEP_STORE_ADDR",
                        "LOCKSTEP_STORE_PORT", "LOCKSTEP_USE_AGENT_STORE", "LOCKSTEP_SOCKET_ADDR",
                        "LOCKSTEP_BIND_ADDR", "LOCKSTEP_TIMEOUT", "LOCKSTEP_DEBUG", "SLURM_PROCID",
                        "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"})
    env[v] = std::nullopt;
  env["OMP_NUM_THREADS"] = "1";
  return env;
}

// `lockstep run` of node `rank` of 2, running `program` (the doctor with `doctor_args` when empty).
std::vector<std::string> node(int rank, int port, std::vector<std::string> doctor_args,
                              std::vector<std::string> program = {}) {
  if (program.empty()) program = {LOCKSTEP_CLI_PATH, "doctor"};
  std::vector<std::string> argv{LOCKSTEP_CLI_PATH,
                                "run",
                                "--nnodes",
                                "2",
                                "--node-rank",
                                std::to_string(rank),
                                "--master-addr",
                                "127.0.0.1",
                                "--master-port",
                                std::to_string(port),
                                "--nproc-per-node",
                                "1",
                                "--rdzv-timeout",
                                "30",
                                "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  if (program.back() == "doctor") argv.insert(argv.end(), doctor_args.begin(), doctor_args.end());
  return argv;
}

struct TwoNodes {
  ProcessResult node0, node1;
  double seconds = 0;
};

TwoNodes run_two_nodes(const EnvChanges& node1_env, std::vector<std::string> doctor_args) {
  const int port = free_port();
  const auto start = Clock::now();
  Child n1(node(1, port, doctor_args), node1_env);
  Child n0(node(0, port, doctor_args), base_environment());
  TwoNodes r;
  r.node0 = n0.wait(90s);
  r.node1 = n1.wait(30s);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

TEST(DoctorNodes, TwoNodesReachEachOtherAndAgreeOnTheTime) {
  TwoNodes r = run_two_nodes(base_environment(), {"--peer-timeout", "20"});
  EXPECT_EQ(r.node0.exit_code, 0) << r.node0.output;
  EXPECT_EQ(r.node1.exit_code, 0) << r.node1.output;
  const std::string& o0 = r.node0.output;
  const std::string& o1 = r.node1.output;
  EXPECT_TRUE(contains(o0, "node 0 of 2, master 127.0.0.1:")) << o0;
  EXPECT_TRUE(contains(o0,
                       "ok       advertise: node 0 of 2 advertises 127.0.0.1 (its address "
                       "toward the store"))
      << o0;
  EXPECT_TRUE(contains(o1, "ok       advertise: node 1 of 2 advertises 127.0.0.1")) << o1;
  EXPECT_TRUE(contains(o0,
                       "ok       reachability: all 2 nodes reach each other at their "
                       "advertised addresses: node 0 ("))
      << o0;
  EXPECT_TRUE(contains(o1, "ok       reachability: this node reaches the 1 other node(s)")) << o1;
  EXPECT_TRUE(contains(o0, "ok       clock: node 1 (")) << o0;
  EXPECT_TRUE(contains(o0, "'s clock is ")) << o0;
  EXPECT_TRUE(contains(o1, "ok       clock: this node (node 1)'s clock is ")) << o1;
  // The master is loopback, so both nodes are on this machine: a loopback host name is fine.
  EXPECT_FALSE(contains(o0, "problem  hostname")) << o0;
  EXPECT_FALSE(contains(o0, "problem  ")) << o0;
}

// Node 1 advertises 192.0.2.1 (TEST-NET-1: no host answers): node 0 names it, its address and
// the reason, and the doctor exits non-zero well within the probe and peer timeouts.
TEST(DoctorNodes, ANodeAdvertisingAnUnreachableAddressIsNamed) {
  EnvChanges env = base_environment();
  env["LOCKSTEP_SOCKET_ADDR"] = "192.0.2.1";
  TwoNodes r = run_two_nodes(env, {"--probe-timeout", "1", "--peer-timeout", "20"});
  EXPECT_LT(r.seconds, 45.0);
  EXPECT_NE(r.node0.exit_code, 0) << r.node0.output;
  const std::string& o0 = r.node0.output;
  EXPECT_TRUE(contains(o0, "problem  reachability: node 1 (")) << o0;
  EXPECT_TRUE(contains(o0, ") advertises 192.0.2.1:")) << o0;
  EXPECT_TRUE(contains(o0, "for data connections, and node 0 cannot reach it: ")) << o0;
  EXPECT_TRUE(contains(o0, "fix: on ")) << o0;
  EXPECT_TRUE(contains(o0, "set LOCKSTEP_SOCKET_ADDR to an address the other nodes can reach"))
      << o0;
  // Node 1 itself reaches node 0, and node 0 still reads its clock through the store.
  EXPECT_TRUE(contains(o0, "ok       clock: node 1 (")) << o0;
}

// Node 1 runs no doctor (a program that only waits): node 0's doctor names node 1 after
// --peer-timeout and exits non-zero; it does not wait longer.
TEST(DoctorNodes, ANodeWhoseDoctorNeverComesIsNamedAfterThePeerTimeout) {
  const int port = free_port();
  const auto start = Clock::now();
  Child n1(node(1, port, {}, {"/bin/sleep", "8"}), base_environment());
  Child n0(node(0, port, {"--peer-timeout", "2"}), base_environment());
  ProcessResult r0 = n0.wait(60s);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_FALSE(r0.timed_out);
  EXPECT_GE(seconds, 2.0);
  EXPECT_LT(seconds, 20.0);
  EXPECT_NE(r0.exit_code, 0) << r0.output;
  EXPECT_TRUE(contains(r0.output,
                       "problem  reachability: node 1 did not publish an address "
                       "within 2 s: its doctor did not start, or cannot reach the "
                       "store"))
      << r0.output;
  EXPECT_TRUE(contains(r0.output, "lockstep run --nnodes 2 --node-rank K ... -- lockstep doctor"))
      << r0.output;
}

// The variables set by hand (as srun or a script would), no launcher: with --peers, rank 0's
// doctor hosts the store at MASTER_ADDR:MASTER_PORT and the two nodes meet there; without it, a
// note says how to check between nodes.
EnvChanges by_hand(int rank, int port) {
  EnvChanges env = base_environment();
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = "0";
  env["WORLD_SIZE"] = "2";
  env["LOCAL_WORLD_SIZE"] = "1";
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(port);
  return env;
}

TEST(DoctorNodes, PeersWithoutTheLauncher) {
  const int port = free_port();
  const std::vector<std::string> args{LOCKSTEP_CLI_PATH, "doctor", "--peers", "--peer-timeout",
                                      "20"};
  Child rank1(args, by_hand(1, port));  // first: it waits for rank 0's store
  Child rank0(args, by_hand(0, port));
  ProcessResult r0 = rank0.wait(60s);
  ProcessResult r1 = rank1.wait(60s);
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_TRUE(contains(r0.output,
                       "ok       reachability: all 2 nodes reach each other at their "
                       "advertised addresses"))
      << r0.output;
  EXPECT_TRUE(contains(r0.output, "ok       clock: node 1 (")) << r0.output;
  EXPECT_TRUE(contains(r1.output, "ok       clock: this node (node 1)'s clock is ")) << r1.output;

  ProcessResult alone = run_lockstep({"doctor"}, by_hand(1, free_port()));
  EXPECT_TRUE(contains(alone.output,
                       "note     reachability: a 2-node job: whether the nodes "
                       "reach each other"))
      << alone.output;
  EXPECT_TRUE(contains(alone.output, "lockstep doctor --peers")) << alone.output;
}

}  // namespace
}  // namespace lockstep::testing
