// `lockstep bench` end to end: the real executable starts real local ranks over TCP, and its
// table is parsed and checked against the formulas it claims (docs/bench.md). Timing values are
// never compared with thresholds; only their internal consistency is.
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

struct TableRow {
  size_t bytes = 0;
  size_t count = 0;
  std::string dtype;
  int iters = 0;
  double time_us = 0, algbw = 0, busbw = 0, memcpy_share = 0;
  std::string check;
};

struct BenchOutput {
  double memcpy_gbps = -1;                 // -1: no memcpy line
  std::vector<std::string> table_headers;  // "# all_reduce: backend tcp, 2 ranks, ..."
  std::vector<TableRow> rows;
};

// Rows are the lines of 9 whitespace-separated fields whose first field is a number.
bool parse_row(const std::string& line, TableRow& row) {
  std::istringstream in(line);
  std::string share;
  if (!(in >> row.bytes >> row.count >> row.dtype >> row.iters >> row.time_us >> row.algbw >>
        row.busbw >> share >> row.check))
    return false;
  std::string extra;
  if (in >> extra || share.empty() || share.back() != '%') return false;
  row.memcpy_share = std::stod(share.substr(0, share.size() - 1));
  return true;
}

bool starts_with_digit(const std::string& line) {
  size_t first = line.find_first_not_of(' ');
  return first != std::string::npos && std::isdigit(static_cast<unsigned char>(line[first]));
}

BenchOutput parse_output(const std::string& text) {
  BenchOutput out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# memcpy: ", 0) == 0) {
      out.memcpy_gbps = std::stod(line.substr(10));
    } else if (line.rfind("# ", 0) == 0 && line.find(": backend ") != std::string::npos) {
      out.table_headers.push_back(line);
    } else if (TableRow row; starts_with_digit(line) && parse_row(line, row)) {
      out.rows.push_back(row);
    }
  }
  return out;
}

ProcessResult run_bench(std::vector<std::string> args,
                        const std::map<std::string, std::optional<std::string>>& env = {}) {
  args.insert(args.begin(), {LOCKSTEP_CLI_PATH, "bench"});
  return run_process(args, env, 120s);
}

// Every row: verified, and its bandwidths follow from its size and time by the nccl-tests
// formulas (up to the printed precision).
void expect_consistent_rows(const BenchOutput& out, double busbw_factor, const std::string& dtype) {
  for (const TableRow& row : out.rows) {
    SCOPED_TRACE("row of " + std::to_string(row.bytes) + " bytes");
    EXPECT_EQ(row.check, "ok");
    EXPECT_EQ(row.dtype, dtype);
    EXPECT_GT(row.time_us, 0.0);
    EXPECT_GE(row.iters, 1);
    const double algbw = static_cast<double>(row.bytes) / row.time_us / 1e3;
    // The time is printed to 0.1 us, so a derived figure is only known to 0.05 / time relative.
    const double rel = 0.01 + 0.05 / row.time_us;
    EXPECT_NEAR(row.algbw, algbw, 0.0006 + rel * algbw);
    EXPECT_NEAR(row.busbw, algbw * busbw_factor, 0.0006 + rel * algbw);
    const double share = 100.0 * row.busbw / out.memcpy_gbps;
    EXPECT_NEAR(row.memcpy_share, share, 0.06 + 0.0006 * 100.0 / out.memcpy_gbps + rel * share);
  }
}

TEST(BenchCli, AllReduceTwoRanksPrintsACheckedTable) {
  ProcessResult r = run_bench({"--nranks", "2", "--op", "all_reduce", "--max-bytes", "65536"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  BenchOutput out = parse_output(r.output);
  ASSERT_GT(out.memcpy_gbps, 0.0) << "no memcpy bandwidth line in:\n" << r.output;
  ASSERT_EQ(out.table_headers.size(), 1u) << r.output;
  EXPECT_NE(out.table_headers[0].find("all_reduce"), std::string::npos) << out.table_headers[0];
  EXPECT_NE(out.table_headers[0].find("2 ranks"), std::string::npos) << out.table_headers[0];
  // 4 B, 8 B, ..., 64 KiB: 15 rows, count = bytes / 4.
  ASSERT_EQ(out.rows.size(), 15u) << r.output;
  for (size_t i = 0; i < out.rows.size(); ++i) {
    EXPECT_EQ(out.rows[i].bytes, size_t{4} << i);
    EXPECT_EQ(out.rows[i].count, out.rows[i].bytes / 4);
  }
  expect_consistent_rows(out, 2.0 * (2 - 1) / 2, "f32");  // all_reduce: 2(n-1)/n
}

TEST(BenchCli, AllGatherTwoRanksRoundsSizesToSlots) {
  ProcessResult r =
      run_bench({"--nranks", "2", "--op", "all_gather", "--max-bytes", "65536", "--dtype", "i32"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  BenchOutput out = parse_output(r.output);
  ASSERT_GT(out.memcpy_gbps, 0.0) << r.output;
  // 4 B holds one slot of one element per rank: 8 B is the first row, and 8 B is not repeated.
  ASSERT_EQ(out.rows.size(), 14u) << r.output;
  for (size_t i = 0; i < out.rows.size(); ++i) EXPECT_EQ(out.rows[i].bytes, size_t{8} << i);
  expect_consistent_rows(out, (2 - 1) / 2.0, "i32");  // all_gather: (n-1)/n
}

// Three ranks (an odd ring) through every collective on each backend, with a root that is not 0
// and a dtype narrower than f32: every table and every row must check out.
class BenchEveryOp : public ::testing::TestWithParam<std::string> {};

TEST_P(BenchEveryOp, OnThreeRanksIsCorrect) {
  const std::string backend = GetParam();
  ProcessResult r =
      run_bench({"--nranks", "3", "--backend", backend, "--op", "all", "--dtype", "bf16", "--root",
                 "2", "--max-bytes", "4K", "--step-factor", "4", "--iters", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  BenchOutput out = parse_output(r.output);
  ASSERT_EQ(out.table_headers.size(), 10u) << r.output;
  for (const auto& h : out.table_headers)
    EXPECT_NE(h.find("backend " + backend + ", 3 ranks"), std::string::npos) << h;
  for (const char* op : {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                         "all_to_all", "gather", "scatter", "sendrecv", "pingpong"}) {
    bool found = false;
    for (const auto& h : out.table_headers)
      found = found || h.rfind("# " + std::string(op) + ":", 0) == 0;
    EXPECT_TRUE(found) << "no table for " << op << " in:\n" << r.output;
  }
  ASSERT_FALSE(out.rows.empty());
  for (const TableRow& row : out.rows) {
    EXPECT_EQ(row.check, "ok") << row.bytes << " bytes";
    EXPECT_EQ(row.iters, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BenchEveryOp, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

TEST(BenchCli, ReduceOpsOtherThanSumAreChecked) {
  for (const char* op : {"max", "prod", "bxor"}) {
    SCOPED_TRACE(op);
    ProcessResult r =
        run_bench({"--nranks", "2", "--op", "all_reduce,reduce_scatter", "--dtype", "i8",
                   "--reduce-op", op, "--max-bytes", "4K", "--step-factor", "8", "--iters", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    BenchOutput out = parse_output(r.output);
    ASSERT_EQ(out.table_headers.size(), 2u) << r.output;
    for (const TableRow& row : out.rows) EXPECT_EQ(row.check, "ok") << row.bytes << " bytes";
  }
}

TEST(BenchCli, BadOptionsExitWithCodeTwoNamingThem) {
  struct Case {
    std::vector<std::string> args;
    std::string named;
  };
  const Case cases[] = {
      {{"--frobnicate"}, "--frobnicate"},
      {{"--op", "all_sum"}, "all_sum"},
      {{"--dtype", "f33"}, "--dtype"},
      {{"--max-bytes", "lots"}, "--max-bytes"},
      {{"--min-bytes", "1M", "--max-bytes", "1K"}, "--min-bytes"},
      {{"--iters", "0"}, "--iters"},
      {{"--reduce-op", "bxor"}, "bxor"},  // f32 cannot be xor-ed
      {{"--nranks", "2", "--op", "broadcast", "--root", "2"}, "--root 2"},
      {{"--nranks"}, "--nranks: missing value"},
  };
  for (const Case& c : cases) {
    ProcessResult r = run_bench(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.named << ":\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << r.output;
  }
}

TEST(BenchCli, HelpListsEveryOptionAndExitsZero) {
  ProcessResult r = run_bench({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* option :
       {"--op", "--backend", "--dtype", "--reduce-op", "--min-bytes", "--max-bytes",
        "--step-factor", "--iters", "--warmup", "--check", "--no-check", "--nranks", "--root"})
    EXPECT_NE(r.output.find(option), std::string::npos) << option;
}

TEST(BenchCli, WithoutLauncherVariablesNamesThemAndSuggestsNranks) {
  ProcessResult r = run_bench({}, {{"RANK", std::nullopt},
                                   {"WORLD_SIZE", std::nullopt},
                                   {"MASTER_ADDR", std::nullopt},
                                   {"MASTER_PORT", std::nullopt},
                                   {"SLURM_PROCID", std::nullopt},
                                   {"SLURM_NTASKS", std::nullopt},
                                   {"OMPI_COMM_WORLD_RANK", std::nullopt},
                                   {"OMPI_COMM_WORLD_SIZE", std::nullopt}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("WORLD_SIZE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--nranks"), std::string::npos) << r.output;
}

// A rank that fails is reported by rank, pid and exit code, and the bench fails.
TEST(BenchCli, FailingLocalRanksAreReported) {
  ProcessResult r =
      run_bench({"--nranks", "2", "--max-bytes", "64"}, {{"LOCKSTEP_TIMEOUT", "not-a-number"}});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("LOCKSTEP_TIMEOUT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 of 2 local ranks failed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lockstep::testing
