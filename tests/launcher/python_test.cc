// Unmodified PyTorch scripts under `lockstep run`, as a torchrun drop-in: torch 2.x with
// gloo over env:// (rank 0 hosts torch's TCPStore at MASTER_PORT, the launcher's own store is
// elsewhere), the script / -m / --no-python forms, Python exceptions in the summary, @record's
// error file, restarts, two nodes, and lockstep programs beside PyTorch scripts.
//
// The interpreter is the one the build found torch in (LOCKSTEP_PYTHON_EXECUTABLE:
// scripts/setup.sh's .venv; LOCKSTEP_TEST_PYTHON overrides it), not whatever python3 comes first on
// PATH. Without torch there, these tests skip: scripts/setup.sh installs it, so the suite runs
// them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <thread>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

const std::string kPythonDir = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/launcher/python";
const std::string kScript = kPythonDir + "/torch_job.py";

// The interpreter, when it can import torch; "" otherwise. Checked once per test process.
const std::string& torch_python() {
  static const std::string python = [] {
    const char* chosen = std::getenv("LOCKSTEP_TEST_PYTHON");
    std::string path = chosen && *chosen ? chosen : LOCKSTEP_TEST_PYTHON_DEFAULT;
    if (path.empty()) return path;
    auto r = run_process({path, "-c", "import torch.distributed"}, {}, std::chrono::seconds(60));
    return r.exit_code == 0 ? path : std::string();
  }();
  return python;
}

#define REQUIRE_TORCH()                                             \
  if (torch_python().empty())                                       \
  GTEST_SKIP() << "needs PyTorch for " LOCKSTEP_TEST_PYTHON_DEFAULT \
                  " (scripts/setup.sh "                             \
                  "installs it into .venv)"

// The launcher runs that interpreter; one thread per rank keeps 3 ranks fast on 2 cores.
EnvChanges python_env(EnvChanges more = {}) {
  more.emplace("LOCKSTEP_PYTHON", torch_python());
  more.emplace("OMP_NUM_THREADS", "1");
  more.emplace("PYTHONDONTWRITEBYTECODE", "1");  // no __pycache__ in the source tree
  return more;
}

// "TORCH_ALLREDUCE_OK rank=R world=W first=F last=L attempt=A local_rank=LR module=M" from
// rank R, with the closed form W (W + 1) / 2 * [1, ..., 1000].
std::string ok_line(int rank, int world, int attempt, const std::string& module = "False",
                    int local_rank = -1) {
  int sum = world * (world + 1) / 2;
  return "TORCH_ALLREDUCE_OK rank=" + std::to_string(rank) + " world=" + std::to_string(world) +
         " first=" + std::to_string(sum) + " last=" + std::to_string(1000 * sum) +
         " attempt=" + std::to_string(attempt) +
         " local_rank=" + std::to_string(local_rank < 0 ? rank : local_rank) + " module=" + module;
}

void expect_every_rank_ok(const std::string& output, int world, int attempt = 0,
                          const std::string& module = "False") {
  for (int rank = 0; rank < world; ++rank)
    EXPECT_EQ(count_of(output, "[rank" + std::to_string(rank) +
                                   "]: " + ok_line(rank, world, attempt, module)),
              1u)
        << output;
}

// The line number of the first line of the script that contains `text`.
int script_line(const std::string& text) {
  std::ifstream in(kScript);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find(text) != std::string::npos) return number;
  }
  ADD_FAILURE() << "no line with " << text << " in " << kScript;
  return -1;
}

// How a rank's uncaught Python exception ends its process. Usually it exits with code 1 after its
// traceback. Now and then torch's gloo aborts in the interpreter's teardown instead, because the
// script never destroyed its group: "terminate called without an active exception", SIGABRT
// (pytorch#190489). The launcher reports whichever happened, and its exit code follows the rank's.
struct PythonExit {
  int code;
  std::string words;  // as the summary's attempt line puts it
};

PythonExit exit_of_raising_rank(const std::string& output) {
  if (output.find("terminate called without an active exception") != std::string::npos)
    return {128 + 6, "was killed by SIGABRT"};
  return {1, "exited with code 1"};
}

class LauncherPython : public ::testing::TestWithParam<int> {};

TEST_P(LauncherPython, ScriptAllReducesAndMeetsInABarrier) {
  REQUIRE_TORCH();
  int world = GetParam();
  auto r = launch({"--standalone", "--nproc-per-node", std::to_string(world), kScript},
                  python_env(), std::chrono::seconds(120));
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  expect_every_rank_ok(r.process.output, world);
  EXPECT_EQ(r.process.output.find("Address already in use"), std::string::npos)
      << "MASTER_PORT must be free for torch's TCPStore\n"
      << r.process.output;
}

INSTANTIATE_TEST_SUITE_P(Ranks, LauncherPython, ::testing::Values(2, 3),
                         [](const auto& info) { return "World" + std::to_string(info.param); });

TEST(LauncherPythonForms, ModuleFormRunsTheModuleWithItsArguments) {
  REQUIRE_TORCH();
  auto r = launch({"--standalone", "--nproc-per-node", "2", "-m", "torch_job", "--fail-rank", "-1"},
                  python_env({{"PYTHONPATH", kPythonDir}}), std::chrono::seconds(120));
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  expect_every_rank_ok(r.process.output, 2, 0, "True");
}

TEST(LauncherPythonForms, NoPythonRunsTheFileAsGiven) {
  REQUIRE_TORCH();
  TempDir dir;
  // A shell script named .py: run as given it works; run by the interpreter it is a SyntaxError.
  std::string script = dir.file("job.py");
  std::ofstream(script) << "#!/bin/sh\necho SHELL_RAN rank=$RANK\n";
  ::chmod(script.c_str(), 0755);
  auto as_given =
      launch({"--standalone", "--nproc-per-node", "2", "--no-python", script}, python_env());
  ASSERT_EQ(as_given.process.exit_code, 0) << as_given.process.output;
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_EQ(count_of(as_given.process.output, "]: SHELL_RAN rank=" + std::to_string(rank)), 1u)
        << as_given.process.output;

  auto by_python = launch({"--standalone", "--nproc-per-node", "1", script}, python_env());
  EXPECT_EQ(by_python.process.exit_code, 1) << by_python.process.output;
  EXPECT_NE(
      summary_of(by_python.process.output)
          .find("root cause (first failure): SyntaxError: invalid syntax (at " + script + ":2)"),
      std::string::npos)
      << by_python.process.output;
}

TEST(LauncherPythonFailure, ExceptionOnRankOneHeadsTheSummary) {
  REQUIRE_TORCH();
  auto r = launch(
      {"--standalone", "--nproc-per-node", "2", "--term-timeout", "5", kScript, "--fail-rank", "1"},
      python_env(), std::chrono::seconds(120));
  PythonExit exit = exit_of_raising_rank(r.process.output);
  EXPECT_EQ(r.process.exit_code, exit.code) << "the script's exit code\n" << r.process.output;
  std::string summary = summary_of(r.process.output);
  std::string headline =
      "root cause (first failure): RuntimeError: rank 1 exploded on purpose (at " + kScript + ":" +
      std::to_string(script_line("raise RuntimeError(f\"rank {rank} exploded")) + ", in explode)\n";
  EXPECT_NE(summary.find(headline), std::string::npos) << summary;
  EXPECT_NE(summary.find("  rank:       1 (local rank 1)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("    RuntimeError: rank 1 exploded on purpose"), std::string::npos)
      << "the last stderr lines follow, as for any program\n"
      << summary;
  EXPECT_NE(summary.find("attempt 0: rank 1 (local rank 1) " + exit.words + " on "),
            std::string::npos)
      << summary;
  EXPECT_EQ(count_of(summary, "root cause"), 1u) << summary;
}

TEST(LauncherPythonFailure, RecordDecoratorWritesTheErrorFileTheSummaryUses) {
  REQUIRE_TORCH();
  TempDir logs;
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--log-dir", logs.path(), kScript,
                   "--fail-rank", "1", "--record"},
                  python_env(), std::chrono::seconds(120));
  EXPECT_EQ(r.process.exit_code, exit_of_raising_rank(r.process.output).code) << r.process.output;
  std::string error_file = logs.path() + "/attempt_0/rank_1.error.json";
  ASSERT_TRUE(file_exists(error_file)) << "@record writes TORCHELASTIC_ERROR_FILE\n"
                                       << r.process.output;
  std::string json = read_file(error_file);
  EXPECT_NE(json.find("rank 1 exploded on purpose"), std::string::npos) << json;
  EXPECT_NE(json.find("py_callstack"), std::string::npos) << json;
  std::string summary = summary_of(r.process.output);
  EXPECT_NE(summary.find("  error file: " + error_file + "\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("root cause (first failure): RuntimeError: rank 1 exploded on purpose "
                         "(at " +
                         kScript + ":" +
                         std::to_string(script_line("raise RuntimeError(f\"rank {rank} exploded")) +
                         ", in explode)"),
            std::string::npos)
      << summary;
}

TEST(LauncherPythonRestart, FailsOnAttemptZeroAndSucceedsOnAttemptOne) {
  REQUIRE_TORCH();
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", kScript,
                   "--fail-rank", "1", "--fail-on-attempt", "0"},
                  python_env(), std::chrono::seconds(180));
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  expect_every_rank_ok(r.process.output, 2, /*attempt=*/1);
  EXPECT_EQ(count_of(r.process.output, "attempt=0 "), 0u) << r.process.output;
  EXPECT_NE(r.process.output.find("the job succeeded on attempt 1 after 1 restart(s)"),
            std::string::npos)
      << r.process.output;
  EXPECT_NE(r.process.output.find("attempt 0: rank 1 (local rank 1) " +
                                  exit_of_raising_rank(r.process.output).words + " on "),
            std::string::npos)
      << r.process.output;
  EXPECT_NE(r.process.output.find(": RuntimeError: rank 1 exploded on purpose (at "),
            std::string::npos)
      << r.process.output;
}

TEST(LauncherPythonMultiNode, TwoLaunchersRunOnePyTorchJob) {
  REQUIRE_TORCH();
  int port = free_port();
  auto node = [&](int rank) {
    return lockstep_run({"--nnodes", "2", "--node-rank", std::to_string(rank), "--master-port",
                         std::to_string(port), "--nproc-per-node", "1", "--rdzv-timeout", "60",
                         kScript});
  };
  Child node1(node(1), python_env());  // first: it waits for node 0
  Child node0(node(0), python_env());
  ProcessResult r0 = node0.wait(std::chrono::seconds(120));
  ProcessResult r1 = node1.wait(std::chrono::seconds(120));
  ASSERT_EQ(r0.exit_code, 0) << r0.output << r1.output;
  ASSERT_EQ(r1.exit_code, 0) << r0.output << r1.output;
  EXPECT_EQ(count_of(r0.output, "[rank0]: " + ok_line(0, 2, 0, "False", 0)), 1u) << r0.output;
  EXPECT_EQ(count_of(r1.output, "[rank1]: " + ok_line(1, 2, 0, "False", 0)), 1u) << r1.output;
}

TEST(LauncherPythonWithLockstep, LockstepProgramThenPyTorchScriptThenBothInOne) {
  REQUIRE_TORCH();
  EnvChanges lockstep_child = child_mode_env("allreduce");
  // A lockstep program: its ranks meet at the launcher's store (LOCKSTEP_STORE_PORT).
  auto lockstep_only =
      launch({"--standalone", "--nproc-per-node", "2", test_binary()}, lockstep_child);
  ASSERT_EQ(lockstep_only.process.exit_code, 0) << lockstep_only.process.output;
  EXPECT_EQ(count_of(lockstep_only.process.output, "ALLREDUCE_OK"), 2u)
      << lockstep_only.process.output;

  // A PyTorch script under the same launcher build.
  auto torch_only = launch({"--standalone", "--nproc-per-node", "2", kScript}, python_env(),
                           std::chrono::seconds(120));
  ASSERT_EQ(torch_only.process.exit_code, 0) << torch_only.process.output;
  expect_every_rank_ok(torch_only.process.output, 2);

  // Both in one job: each rank's PyTorch script (torch's store at MASTER_PORT) then starts a
  // lockstep program, whose ranks form their own group through the launcher's store.
  auto together =
      launch({"--standalone", "--nproc-per-node", "2", kScript, "--then", test_binary()},
             python_env(lockstep_child), std::chrono::seconds(120));
  ASSERT_EQ(together.process.exit_code, 0) << together.process.output;
  expect_every_rank_ok(together.process.output, 2);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_EQ(count_of(together.process.output, "[rank" + std::to_string(rank) +
                                                    "]: ALLREDUCE_OK rank=" + std::to_string(rank) +
                                                    " world=2"),
              1u)
        << together.process.output;
}

}  // namespace
}  // namespace lockstep::testing
