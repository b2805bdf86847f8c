// The job's secret under `lockstep run` (docs/security.md): every rank gets the same one, through
// the environment and never on a command line; each one-node job gets a fresh one; --secret-file
// gives the file's; and a rank with another secret is refused by the launcher's store with an
// AuthError that the summary shows for that rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "launcher_test_util.h"
#include "support/messages.h"

namespace lockstep::testing {
namespace {

// Prints a digest of the secret (never the secret), its length, and how often it appears in this
// shell's and the launcher's command lines.
const char* kShowSecret =
    "d=$(printf %s \"$LOCKSTEP_SECRET\" | md5sum | cut -c1-12); "
    "n=$(cat /proc/$$/cmdline /proc/$PPID/cmdline | tr '\\0' ' ' | grep -c -F -- "
    "\"$LOCKSTEP_SECRET\"); "
    "echo SECRET digest=$d length=${#LOCKSTEP_SECRET} in_cmdline=$n "
    "matches_expected=$([ \"$LOCKSTEP_SECRET\" = \"$EXPECTED\" ] && echo yes || echo no)";

std::set<std::string> digests(const std::string& output, const std::string& field) {
  std::set<std::string> seen;
  for (const std::string& line : lines_with_prefix(output, "")) {
    auto at = line.find(field + "=");
    if (line.find("SECRET ") == std::string::npos || at == std::string::npos) continue;
    seen.insert(line.substr(at + field.size() + 1, line.find(' ', at) - at - field.size() - 1));
  }
  return seen;
}

TEST(LauncherSecret, EveryRankGetsTheSameFreshSecretThroughTheEnvironmentOnly) {
  std::set<std::string> per_job;
  for (int job = 0; job < 2; ++job) {
    auto r = launch({"--standalone", "--nproc-per-node", "2", "/bin/sh", "-c", kShowSecret},
                    {{"LOCKSTEP_SECRET", std::nullopt}, {"LOCKSTEP_SECRET_FILE", std::nullopt}});
    ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
    auto d = digests(r.process.output, "digest");
    ASSERT_EQ(d.size(), 1u) << "ranks of one job got different secrets:\n" << r.process.output;
    per_job.insert(*d.begin());
    EXPECT_EQ(digests(r.process.output, "length"), std::set<std::string>{"64"});
    EXPECT_EQ(digests(r.process.output, "in_cmdline"), std::set<std::string>{"0"})
        << "the secret is visible in a command line";
  }
  EXPECT_EQ(per_job.size(), 2u) << "two jobs got the same secret";
}

TEST(LauncherSecret, SecretFileGivesEveryRankTheFilesSecret) {
  TempDir dir;
  const std::string path = dir.path() + "/secret";
  std::ofstream(path) << "shared by every node\n";
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--secret-file", path, "/bin/sh", "-c",
                   kShowSecret},
                  {{"EXPECTED", "shared by every node"}, {"LOCKSTEP_SECRET", std::nullopt}});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_EQ(digests(r.process.output, "matches_expected"), std::set<std::string>{"yes"})
      << r.process.output;
}

TEST(LauncherSecret, AMissingSecretFileIsAUsageError) {
  auto r = launch({"--standalone", "--secret-file", "/nonexistent/secret", "/bin/true"});
  EXPECT_EQ(r.process.exit_code, 2) << r.process.output;
  EXPECT_CONTAINS(r.process.output, "/nonexistent/secret");
  EXPECT_CONTAINS(r.process.output, "cannot be read");
}

// Rank 1 replaces the job's secret with its own: the launcher's store refuses it with an
// AuthError, and the summary names rank 1 and says why.
TEST(LauncherSecret, ARankWithAnotherSecretGetsANamedAuthError) {
  const std::string lockstep = lockstep_run({}).front();
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then export LOCKSTEP_SECRET=not-the-jobs; fi; exec " + lockstep +
      " bench --op all_reduce --min-bytes 4 --max-bytes 4 --iters 2";
  auto r = launch({"--standalone", "--nproc-per-node", "2", "/bin/sh", "-c", script},
                  {{"LOCKSTEP_TIMEOUT", "20"}}, std::chrono::seconds(60));
  EXPECT_NE(r.process.exit_code, 0) << r.process.output;
  EXPECT_CONTAINS(r.process.output, "rank 1: this process's secret differs from the store's");
  EXPECT_CONTAINS(summary_of(r.process.output), "rank 1");
  EXPECT_LT(r.seconds, 20.0) << "the refusal waited for a timeout";
}

// --standalone: the launcher's store listens on loopback alone (127.0.0.2, also this host's
// loopback, finds nothing); --bind-addr 0.0.0.0 opens it on every interface and reaches the ranks
// as LOCKSTEP_BIND_ADDR.
TEST(LauncherSecret, StandaloneStoreListensOnLoopbackOnlyUnlessBindAddrSaysOtherwise) {
  const char* probe =
      "for h in 127.0.0.1 127.0.0.2; do "
      "if (exec 3<>/dev/tcp/$h/$LOCKSTEP_STORE_PORT) 2>/dev/null; then echo PROBE $h=open; "
      "else echo PROBE $h=closed; fi; done; echo PROBE bind=${LOCKSTEP_BIND_ADDR:-none}";
  auto r = launch({"--standalone", "--nproc-per-node", "1", "/bin/bash", "-c", probe});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_CONTAINS(r.process.output, "PROBE 127.0.0.1=open");
  EXPECT_CONTAINS(r.process.output, "PROBE 127.0.0.2=closed");
  EXPECT_CONTAINS(r.process.output, "PROBE bind=none");
  r = launch({"--standalone", "--nproc-per-node", "1", "--bind-addr", "0.0.0.0", "/bin/bash", "-c",
              probe});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  EXPECT_CONTAINS(r.process.output, "PROBE 127.0.0.2=open");
  EXPECT_CONTAINS(r.process.output, "PROBE bind=0.0.0.0");
}

// A tcp job that logs at INFO (the store's lines and the data connections' included), writes its
// output to log files, and dumps its flight recorders on SIGTERM: the secret is in none of it,
// nor in the launcher's summary.
TEST(LauncherSecret, TheSecretAppearsInNoLogDumpOrSummary) {
  TempDir dir;
  const std::string secret = "a-secret-that-must-never-show-4711";
  const std::string path = dir.path() + "/secret";
  std::ofstream(path) << secret << "\n";
  const std::string lockstep = lockstep_run({}).front();
  const std::string script = lockstep +
                             " bench --backend tcp --op all_reduce --min-bytes 4 --max-bytes 4 "
                             "--iters 1000000 & b=$!; sleep 6; kill -TERM $b; wait $b; true";
  auto r = launch({"--standalone", "--nproc-per-node", "2", "--secret-file", path, "--log-dir",
                   dir.path() + "/logs", "--tee", "3", "/bin/sh", "-c", script},
                  {{"LOCKSTEP_DEBUG", "INFO"},
                   {"LOCKSTEP_TRACE_DIR", dir.path() + "/trace"},
                   {"LOCKSTEP_SECRET", std::nullopt}},
                  std::chrono::seconds(60));
  EXPECT_EQ(r.process.output.find(secret), std::string::npos) << r.process.output;
  size_t files = 0, dumps = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (!entry.is_regular_file() || entry.path() == path) continue;
    ++files;
    if (entry.path().string().find("/trace/") != std::string::npos) ++dumps;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str().find(secret), std::string::npos) << "the secret is in " << entry.path();
  }
  EXPECT_GE(dumps, 1u) << "no flight-recorder dump was written:\n" << r.process.output;
  EXPECT_GE(files, 3u);
}

}  // namespace
}  // namespace lockstep::testing
