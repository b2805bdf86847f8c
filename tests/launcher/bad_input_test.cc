// Test 7 of the launcher issue: bad input gets a clear message and exit code 2 before anything
// starts.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>

#include <fstream>
#include <ostream>

#include "launcher_test_util.h"

namespace lockstep::testing {
namespace {

struct BadInput {
  const char* name;
  std::vector<std::string> args;  // the program is appended where it is "{PROGRAM}"
  const char* message;            // must appear in the output
  EnvChanges env = {};            // for the launcher
};

void PrintTo(const BadInput& input, std::ostream* out) {
  *out << input.name;
}

class LauncherBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(LauncherBadInput, ExitsTwoWithAClearMessageBeforeStarting) {
  TempDir dir;
  std::string marker = dir.file("started");
  std::string not_executable = dir.file("script.sh");
  std::ofstream(not_executable) << "#!/bin/sh\ntouch " << marker << "\n";
  ::chmod(not_executable.c_str(), 0644);
  std::string py_script = dir.file("job.py");  // would create the marker if it ever ran
  std::ofstream(py_script) << "open('" << marker << "', 'w')\n";
  std::vector<std::string> args;
  for (const auto& a : GetParam().args) {
    if (a == "{PROGRAM}") {
      for (const char* p : {"/bin/sh", "-c"}) args.push_back(p);
      args.push_back("touch " + marker);
    } else if (a == "{NOT_EXECUTABLE}") {
      args.push_back(not_executable);
    } else if (a == "{PY_SCRIPT}") {
      args.push_back(py_script);
    } else if (a == "{DIR}") {
      args.push_back(dir.path());
    } else {
      args.push_back(a);
    }
  }
  auto r = launch(args, GetParam().env, std::chrono::seconds(20));
  EXPECT_EQ(r.process.exit_code, 2) << r.process.output;
  EXPECT_NE(r.process.output.find(GetParam().message), std::string::npos) << r.process.output;
  EXPECT_EQ(r.process.output.find("lockstep run: error:"), 0u) << "one clear line\n"
                                                               << r.process.output;
  EXPECT_EQ(count_of(r.process.output, "\n"), 1u) << "one clear line\n" << r.process.output;
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_FALSE(file_exists(marker)) << "nothing may start";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LauncherBadInput,
    ::testing::Values(
        BadInput{"MissingProgramPath",
                 {"--standalone", "/no/such/program"},
                 "program '/no/such/program' does not exist"},
        BadInput{"MissingProgramInPath",
                 {"--standalone", "no-such-program-xyz"},
                 "program 'no-such-program-xyz' was not found in PATH"},
        BadInput{"NonExecutableFile",
                 {"--standalone", "{NOT_EXECUTABLE}"},
                 "is not executable; make it so with: chmod +x"},
        BadInput{"Directory", {"--standalone", "{DIR}"}, "is a directory, not a program"},
        BadInput{"NoProgram", {"--standalone"}, "no program given"},
        BadInput{"ZeroProcesses",
                 {"--nproc-per-node", "0", "{PROGRAM}"},
                 "--nproc-per-node 0 is out of range"},
        BadInput{"ProcessesNotANumber",
                 {"--nproc-per-node", "four", "{PROGRAM}"},
                 "--nproc-per-node: 'four' is not a whole number"},
        BadInput{"NodeRankEqualsNnodes",
                 {"--nnodes", "2", "--node-rank", "2", "{PROGRAM}"},
                 "--node-rank 2 is out of range for --nnodes 2: node ranks are 0..1"},
        BadInput{"UnknownOption",
                 {"--nproc-per-nodes", "2", "{PROGRAM}"},
                 "unknown option '--nproc-per-nodes'"},
        BadInput{"MissingValue", {"--nnodes"}, "--nnodes needs a value"},
        BadInput{"FreePortWithSeveralNodes",
                 {"--nnodes", "2", "--master-port", "0", "{PROGRAM}"},
                 "--master-port 0 picks a port that the other 1 node(s) cannot know"},
        BadInput{"FilterOutsideLocalRanks",
                 {"--nproc-per-node", "2", "--local-ranks-filter", "2", "{PROGRAM}"},
                 "--local-ranks-filter names local rank 2, but --nproc-per-node is 2"},
        BadInput{"BadTeeValue", {"--tee", "4", "{PROGRAM}"}, "--tee 4 is out of range"},
        // Elastic ranges (--nnodes MIN:MAX): each bad form names its problem.
        BadInput{"ElasticMinZero",
                 {"--nnodes", "0:2", "{PROGRAM}"},
                 "--nnodes 0:2: MIN 0 is out of range: give a number in [1, 65536]"},
        BadInput{"ElasticMinAboveMax",
                 {"--nnodes", "3:2", "{PROGRAM}"},
                 "--nnodes 3:2: MIN 3 is larger than MAX 2"},
        BadInput{"ElasticNotNumbers",
                 {"--nnodes", "a:b", "{PROGRAM}"},
                 "--nnodes a:b: MIN 'a' is not a whole number"},
        BadInput{"ElasticMaxNotANumber",
                 {"--nnodes", "1:x", "{PROGRAM}"},
                 "--nnodes 1:x: MAX 'x' is not a whole number"},
        BadInput{"ElasticWithoutMax", {"--nnodes", "1:", "{PROGRAM}"}, "--nnodes: '1:' lacks MAX"},
        BadInput{"ElasticWithoutMin", {"--nnodes", ":2", "{PROGRAM}"}, "--nnodes: ':2' lacks MIN"},
        BadInput{"ElasticTwoColons",
                 {"--nnodes", "1:2:3", "{PROGRAM}"},
                 "--nnodes 1:2:3: MAX '2:3' is not a whole number"},
        BadInput{"ElasticFreePort",
                 {"--nnodes", "1:2", "--master-port", "0", "{PROGRAM}"},
                 "--master-port 0 picks a port that the other nodes of an elastic job cannot know"},
        BadInput{"ElasticStandalone",
                 {"--nnodes", "1:2", "--standalone", "{PROGRAM}"},
                 "--standalone runs one node, but --nnodes is the elastic range 1:2"},
        BadInput{"ElasticBadLastCall",
                 {"--nnodes", "1:2", "--rdzv-last-call", "soon", "{PROGRAM}"},
                 "--rdzv-last-call: 'soon' is not a number of seconds"},
        // Python scripts and modules (torchrun's invocation forms).
        BadInput{"MissingScript",
                 {"--standalone", "--nproc-per-node", "2", "/no/such/train.py", "--epochs", "1"},
                 "script '/no/such/train.py' does not exist"},
        BadInput{"ModuleWithoutName", {"--standalone", "-m"}, "-m needs a module name"},
        BadInput{"ModuleWithoutNameAfterDashes",
                 {"--standalone", "--module", "--"},
                 "-m needs a module name"},
        BadInput{
            "ModuleAndNoPython", {"--standalone", "-m", "--no-python", "pkg.train"}, "choose one"},
        BadInput{"InterpreterFromEnvironmentMissing",
                 {"--standalone", "{PY_SCRIPT}"},
                 "needs a Python interpreter, but LOCKSTEP_PYTHON='/no/such/python3' is not one",
                 {{"LOCKSTEP_PYTHON", "/no/such/python3"}}},
        BadInput{"InterpreterOptionMissing",
                 {"--standalone", "--python", "/no/such/python3", "-m", "pkg.train"},
                 "needs a Python interpreter, but --python='/no/such/python3' is not one"},
        BadInput{"NoPython3InPath",
                 {"--standalone", "{PY_SCRIPT}"},
                 "needs a Python interpreter, but python3 is not in PATH",
                 {{"LOCKSTEP_PYTHON", std::nullopt}, {"PATH", "/nonexistent-bin"}}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LauncherHelp, ExplainsEveryOptionInOneLine) {
  auto r = launch({"--help"});
  EXPECT_EQ(r.process.exit_code, 0);
  for (const char* option :
       {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port",
        "--standalone", "--max-restarts", "--monitor-interval", "--rdzv-timeout", "--term-timeout",
        "--run-id", "--log-dir", "--tee", "--redirects", "--local-ranks-filter", "--module",
        "--no-python", "--python", "--help"}) {
    auto lines = lines_with_prefix(r.process.output, std::string("  ") + option + " ");
    EXPECT_EQ(lines.size(), 1u) << option << "\n" << r.process.output;
  }
}

TEST(LauncherHelp, AutoMeansTheCoreCount) {
  auto r = launch({"--standalone", "--nproc-per-node", "auto", "/bin/sh", "-c", "echo hi"});
  ASSERT_EQ(r.process.exit_code, 0) << r.process.output;
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  EXPECT_EQ(count_of(r.process.output, "]: hi\n"), static_cast<size_t>(CPU_COUNT(&set)));
}

}  // namespace
}  // namespace lockstep::testing
