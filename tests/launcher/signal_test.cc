// Test 5 of the launcher issue: signals to the launcher reach every rank, and no rank (nor what
// it started) outlives the launcher, even when the launcher is killed with SIGKILL.
#include <gtest/gtest.h>
#include <signal.h>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

// Each rank records its pid and a background child's pid, then waits.
std::string waiting_script(const TempDir& dir) {
  std::string d = dir.path();
  return "sleep 30 & echo $! > " + d + "/gpid_$RANK.tmp; mv " + d + "/gpid_$RANK.tmp " + d +
         "/gpid_$RANK; echo $$ > " + d + "/pid_$RANK.tmp; mv " + d + "/pid_$RANK.tmp " + d +
         "/pid_$RANK; wait";
}

std::vector<std::string> pid_files(const TempDir& dir, int ranks) {
  std::vector<std::string> files;
  for (int r = 0; r < ranks; ++r)
    for (const char* kind : {"pid_", "gpid_"}) files.push_back(dir.file(kind + std::to_string(r)));
  return files;
}

void expect_forwarded(int sig, const char* name) {
  TempDir dir;
  Child launcher(lockstep_run(
      {"--standalone", "--nproc-per-node", "2", "/bin/sh", "-c", waiting_script(dir)}));
  auto pids = wait_for_pid_files(pid_files(dir, 2), std::chrono::seconds(20));
  auto sent = std::chrono::steady_clock::now();
  launcher.kill(sig);
  ProcessResult r = launcher.wait(std::chrono::seconds(20));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(r.exit_code, 128 + sig) << r.output;
  EXPECT_LT(seconds, 5.0);
  auto alive = still_alive_after(pids, std::chrono::seconds(2));
  EXPECT_TRUE(alive.empty()) << alive.size() << " processes outlived the launcher";
  kill_all(alive);
  EXPECT_NE(r.output.find(std::string("received ") + name + " and forwarded it to every rank"),
            std::string::npos)
      << r.output;
  // The ranks died of the forwarded signal itself, not of a later SIGKILL.
  EXPECT_EQ(count_of(r.output, std::string("was killed by ") + name + " after the launcher"), 2u)
      << r.output;
}

TEST(LauncherSignals, SigtermIsForwardedAndLeavesNoChildBehind) {
  expect_forwarded(SIGTERM, "SIGTERM");
}

TEST(LauncherSignals, SigintIsForwardedAndLeavesNoChildBehind) {
  expect_forwarded(SIGINT, "SIGINT");
}

TEST(LauncherSignals, SigkillOfTheLauncherTakesEveryRankAndItsChildrenDown) {
  TempDir dir;
  Child launcher(lockstep_run(
      {"--standalone", "--nproc-per-node", "2", "/bin/sh", "-c", waiting_script(dir)}));
  auto pids = wait_for_pid_files(pid_files(dir, 2), std::chrono::seconds(20));
  launcher.kill(SIGKILL);
  ProcessResult r = launcher.wait(std::chrono::seconds(10));
  EXPECT_EQ(r.signal, SIGKILL);
  auto alive = still_alive_after(pids, std::chrono::seconds(5));
  EXPECT_TRUE(alive.empty()) << alive.size() << " of " << pids.size()
                             << " processes (ranks and their children) outlived the launcher";
  kill_all(alive);
}

}  // namespace
}  // namespace lockstep::testing
