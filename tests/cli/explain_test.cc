// `lockstep explain` end to end: the real executable reads sample logs of PyTorch, NCCL and
// lockstep failures (tests/cli/data/*.log, written for these tests) and must rank the right
// signature first with its fix; the signatures come from the data file it ships with, found
// beside the executable, or from an override.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace lockstep::testing {
namespace {

const std::string kDataDir = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/cli/data/";
const std::string kShippedSignatures =
    std::string(LOCKSTEP_SOURCE_DIR) + "/data/explain_signatures.txt";
// The shipped file, whatever the environment of the test says.
const EnvChanges kNoOverride = {{"LOCKSTEP_EXPLAIN_SIGNATURES", std::nullopt}};

ProcessResult explain(std::vector<std::string> args, const EnvChanges& env = kNoOverride) {
  args.insert(args.begin(), "explain");
  return run_lockstep(args, env);
}

// The ids of the findings, in the order printed ("   signature ID, ..." under each title).
std::vector<std::string> finding_ids(const std::string& output) {
  std::vector<std::string> ids;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("   signature ", 0) != 0) continue;
    std::string id = line.substr(13);
    ids.push_back(id.substr(0, id.find(',')));
  }
  return ids;
}

// The text of finding n (1-based): from its "n. " title line to the next finding.
std::string finding_block(const std::string& output, int n) {
  const std::string start = "\n" + std::to_string(n) + ". ";
  size_t begin = output.find(start);
  if (begin == std::string::npos) return "";
  size_t end = output.find("\n" + std::to_string(n + 1) + ". ", begin + 1);
  return output.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

struct Sample {
  const char* log;
  const char* first;  // the signature that must rank first
  int catalogue;      // its failure catalogue entry
  const char* fix;    // a part of its fix
};

const Sample kSamples[] = {
    {"pytorch_scatter_gather.log", "scatter-gather-kernel", 1, "all_gather_v"},
    {"lockstep_size_mismatch.log", "lockstep-size-mismatch", 1, "use the v-variants"},
    {"lockstep_order_mismatch.log", "lockstep-order-mismatch", 2, "LOCKSTEP_DEBUG=DETAIL"},
    {"torchrun_sigkill.log", "exit-code-9", 3, "dmesg | grep -i 'killed process'"},
    {"lockstep_peer_died.log", "lockstep-peer-died", 3, "prints the root cause"},
    {"pytorch_env_missing.log", "pytorch-environment", 4, "torchrun --nproc-per-node N"},
    {"store_socket_timeout.log", "socket-timeout", 5, "nc -z HOST PORT"},
    {"address_in_use.log", "address-in-use", 6, "--master-port"},
    {"nccl_duplicate_gpu.log", "duplicate-gpu", 7, "LOCAL_RANK"},
    {"lockstep_duplicate_gpu.log", "duplicate-gpu", 7, "LOCAL_RANK"},
    {"ddp_unfinished_reduction.log", "pytorch-unfinished-reduction", 8,
     "find_unused_parameters=True"},
    {"inplace_buffer.log", "inplace-modified", 9, "broadcast_buffers=False"},
    {"ddp_model_differs.log", "pytorch-model-differs", 10, "same model on every rank"},
    {"nccl_watchdog_timeout.log", "nccl-watchdog-timeout", 11, "Compare SeqNum"},
    {"lockstep_dataset_size.log", "lockstep-dataset-size-differs", 12,
     "load the same full dataset"},
    {"nccl_system_error.log", "nccl-system-error", 0, "--shm-size"},
    {"tensors_device.log", "tensors-on-different-devices", 0, "from LOCAL_RANK"},
};

TEST(Explain, EverySampleLogRanksItsSignatureFirstWithItsFix) {
  for (const Sample& s : kSamples) {
    SCOPED_TRACE(s.log);
    ProcessResult r = explain({kDataDir + s.log});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::vector<std::string> ids = finding_ids(r.output);
    ASSERT_FALSE(ids.empty()) << r.output;
    EXPECT_EQ(ids[0], s.first) << r.output;
    const std::string first = finding_block(r.output, 1);
    if (s.catalogue > 0) {
      EXPECT_NE(first.find("failure catalogue entry " + std::to_string(s.catalogue) + "\n"),
                std::string::npos)
          << first;
    }
    // The fix may be wrapped across lines: compare with runs of spaces and newlines collapsed.
    std::string flat;
    for (char c : first) {
      if (c == '\n') c = ' ';
      if (c != ' ' || flat.empty() || flat.back() != ' ') flat += c;
    }
    EXPECT_NE(flat.find(s.fix), std::string::npos) << first;
  }
}

TEST(Explain, SamplesCoverEveryCatalogueEntry) {
  std::set<int> covered;
  for (const Sample& s : kSamples) covered.insert(s.catalogue);
  for (int entry = 1; entry <= 12; ++entry) EXPECT_TRUE(covered.count(entry)) << entry;
}

TEST(Explain, EveryCatalogueEntryHasASignature) {
  ProcessResult r = explain({"--list"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> entries;
  std::istringstream lines(r.output);
  std::string line;
  std::getline(lines, line);  // "N signatures from PATH"
  EXPECT_NE(line.find(" signatures from "), std::string::npos) << line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string id, entry;
    fields >> id >> entry;
    entries.insert(entry);
  }
  for (int entry = 1; entry <= 12; ++entry)
    EXPECT_TRUE(entries.count(std::to_string(entry))) << "no signature for entry " << entry;
}

TEST(Explain, GenericWrappersRankBelowTheSpecificCause) {
  ProcessResult gpu = explain({kDataDir + "nccl_duplicate_gpu.log"});
  EXPECT_EQ(finding_ids(gpu.output),
            (std::vector<std::string>{"duplicate-gpu", "nccl-invalid-usage", "dist-backend-error"}))
      << gpu.output;
  ProcessResult watchdog = explain({kDataDir + "nccl_watchdog_timeout.log"});
  EXPECT_EQ(finding_ids(watchdog.output),
            (std::vector<std::string>{"nccl-watchdog-timeout", "dist-backend-error"}))
      << watchdog.output;
  ProcessResult scatter = explain({kDataDir + "pytorch_scatter_gather.log"});
  EXPECT_EQ(finding_ids(scatter.output),
            (std::vector<std::string>{"scatter-gather-kernel", "child-failed"}))
      << scatter.output;
}

TEST(Explain, ShowsTheMatchedLinesAndTheCausesInOrder) {
  ProcessResult r = explain({kDataDir + "pytorch_scatter_gather.log"});
  const std::string first = finding_block(r.output, 1);
  EXPECT_NE(first.find("matched 1 line:\n     10: [rank1]: RuntimeError: Error in Scatter/Gather "
                       "kernel\n"),
            std::string::npos)
      << first;
  size_t cause1 = first.find("1. The ranks passed tensors of different shapes");
  size_t cause2 = first.find("2. The output tensors");
  ASSERT_NE(cause1, std::string::npos) << first;
  ASSERT_NE(cause2, std::string::npos) << first;
  EXPECT_LT(cause1, cause2);
  // Every rank's copy of one error is counted, and only the first few lines are shown.
  ProcessResult mismatch = explain({kDataDir + "lockstep_size_mismatch.log"});
  EXPECT_NE(mismatch.output.find("matched 2 lines:\n     4: [rank 0]   what():  all_gather #41"),
            std::string::npos)
      << mismatch.output;
}

TEST(Explain, ReadsStandardInput) {
  ProcessResult r = run_process({"/bin/sh", "-c", "exec \"$0\" explain - < \"$1\"",
                                 LOCKSTEP_CLI_PATH, kDataDir + "address_in_use.log"},
                                kNoOverride);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("in standard input (4 lines)"), std::string::npos) << r.output;
  EXPECT_EQ(finding_ids(r.output).at(0), "address-in-use");
}

TEST(Explain, NothingRecognisedExitsOne) {
  ProcessResult r = explain({kDataDir + "clean.log"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no known signature in " + kDataDir + "clean.log (3 lines read)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(finding_ids(r.output).empty());
}

TEST(Explain, BadInvocationsExitTwo) {
  ProcessResult missing = explain({kDataDir + "no_such.log"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("cannot read the log '" + kDataDir + "no_such.log'"),
            std::string::npos)
      << missing.output;
  ProcessResult two = explain({kDataDir + "clean.log", kDataDir + "inplace_buffer.log"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.output.find("more than one log"), std::string::npos) << two.output;
  ProcessResult option = explain({"--colour"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.output.find("unknown option '--colour'"), std::string::npos) << option.output;
}

constexpr const char* kCustomSignatures =
    "# one signature of our own\n"
    "signature: custom-oops\n"
    "title: The widget overheated\n"
    "catalogue: 3\n"
    "priority: 77\n"
    "match: OOPS-\\d+ widget\n"
    "cause: The fan stopped.\n"
    "cause: The room is hot.\n"
    "fix: Replace the fan,\n"
    "  then restart the widget.\n";

TEST(Explain, ReadsTheSignaturesFromTheOverrideFile) {
  ScratchDir dir;
  write_text(dir.file("custom.txt"), kCustomSignatures);
  write_text(dir.file("widget.log"), "starting\nerror: OOPS-42 widget at 90 C\n");
  for (bool by_option : {false, true}) {
    SCOPED_TRACE(by_option ? "--signatures" : "LOCKSTEP_EXPLAIN_SIGNATURES");
    ProcessResult r =
        by_option ? explain({"--signatures", dir.file("custom.txt"), dir.file("widget.log")})
                  : explain({dir.file("widget.log")},
                            {{"LOCKSTEP_EXPLAIN_SIGNATURES", dir.file("custom.txt")}});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(finding_ids(r.output), std::vector<std::string>{"custom-oops"}) << r.output;
    EXPECT_NE(r.output.find("(signatures: " + dir.file("custom.txt") + ")"), std::string::npos);
    EXPECT_NE(r.output.find("1. The widget overheated\n   signature custom-oops, failure "
                            "catalogue entry 3\n"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("     2: error: OOPS-42 widget at 90 C\n"), std::string::npos);
    EXPECT_NE(r.output.find("- Replace the fan, then restart the widget.\n"), std::string::npos)
        << r.output;
  }
  // Only the override is read: a log the shipped signatures know is now unknown.
  ProcessResult other = explain({kDataDir + "inplace_buffer.log"},
                                {{"LOCKSTEP_EXPLAIN_SIGNATURES", dir.file("custom.txt")}});
  EXPECT_EQ(other.exit_code, 1) << other.output;
}

TEST(Explain, AMalformedSignatureFileIsAnErrorNamingTheLine) {
  ScratchDir dir;
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"signature: a\ntitle: t\nmatch: (unclosed\ncause: c\nfix: f\n",
       ":3: signature 'a': bad regular expression '(unclosed'"},
      {"signature: a\ntitle: t\nmatch: x\ncause: c\n", ":1: signature 'a' has no 'fix:' line"},
      {"signature: a\ntitle: t\nmatch: x\ncause: c\nfix: f\nseverity: high\n",
       ":6: unknown key 'severity'"},
      {"signature: a\ntitle: t\ncatalogue: 13\nmatch: x\ncause: c\nfix: f\n",
       ":3: catalogue: '13' is not an integer in [1, 12]"},
      {"signature: a\ntitle: t\nmatch: x\ncause: c\nfix: f\nsignature: a\n",
       ":6: signature 'a' is defined twice"},
      {"# nothing\n", ":1: the file has no signatures"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    write_text(dir.file("bad.txt"), c.text);
    ProcessResult r = explain({"--signatures", dir.file("bad.txt"), kDataDir + "clean.log"});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(dir.file("bad.txt") + c.error), std::string::npos) << r.output;
  }
}

// The installed layout: <prefix>/bin/lockstep reads <prefix>/share/lockstep/.
TEST(Explain, FindsTheShippedFileRelativeToTheExecutable) {
  ScratchDir prefix;
  const std::string exe = prefix.file("bin/lockstep");
  std::filesystem::create_directories(prefix.file("bin"));
  std::filesystem::copy_file(LOCKSTEP_CLI_PATH, exe);
  ProcessResult without =
      run_process({exe, "explain", kDataDir + "inplace_buffer.log"}, kNoOverride);
  EXPECT_EQ(without.exit_code, 2) << without.output;
  EXPECT_NE(without.output.find("cannot find explain_signatures.txt; looked in:\n  " +
                                prefix.file("share/lockstep/explain_signatures.txt")),
            std::string::npos)
      << without.output;

  std::filesystem::create_directories(prefix.file("share/lockstep"));
  std::filesystem::copy_file(kShippedSignatures,
                             prefix.file("share/lockstep/explain_signatures.txt"));
  ProcessResult with = run_process({exe, "explain", kDataDir + "inplace_buffer.log"}, kNoOverride);
  ASSERT_EQ(with.exit_code, 0) << with.output;
  EXPECT_NE(
      with.output.find("(signatures: " + prefix.file("share/lockstep/explain_signatures.txt")),
      std::string::npos)
      << with.output;
  EXPECT_EQ(finding_ids(with.output).at(0), "inplace-modified");
}

}  // namespace
}  // namespace lockstep::testing
