// Re-running the test binary as a child process: a child entry point is a gtest test named
// DISABLED_..., so a normal run never executes it, and child_argv() selects exactly it.
#pragma once

#include <string>
#include <vector>

namespace lockstep::testing {

// argv that re-runs this test binary executing only `suite.DISABLED_name`.
inline std::vector<std::string> child_argv(const std::string& suite_and_test) {
  return {"/proc/self/exe", "--gtest_also_run_disabled_tests", "--gtest_filter=" + suite_and_test,
          "--gtest_brief=1"};
}

}  // namespace lockstep::testing
