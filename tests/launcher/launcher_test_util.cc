#include "launcher_test_util.h"

#include <ftw.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "lockstep/core/deadline.h"

namespace lockstep::testing {

std::vector<std::string> lockstep_run(const std::vector<std::string>& args) {
  std::vector<std::string> argv{LOCKSTEP_CLI_PATH, "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

LaunchResult launch(const std::vector<std::string>& args, const EnvChanges& env,
                    std::chrono::milliseconds timeout) {
  auto start = Clock::now();
  LaunchResult result;
  result.process = run_process(lockstep_run(args), env, timeout);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::vector<std::string> lines_with_prefix(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  return lines;
}

std::string summary_of(const std::string& output) {
  size_t at = output.find("=====");
  return at == std::string::npos ? "" : output.substr(at);
}

std::string test_binary() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  return std::string(path, static_cast<size_t>(n));
}

EnvChanges child_mode_env(const std::string& mode) {
  return {{"LOCKSTEP_LAUNCHER_TEST_CHILD", mode},
          {"GTEST_FILTER", "LauncherChild.DISABLED_Main"},
          {"GTEST_ALSO_RUN_DISABLED_TESTS", "1"}};
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<pid_t> wait_for_pid_files(const std::vector<std::string>& paths,
                                      std::chrono::milliseconds timeout) {
  Deadline deadline = Deadline::after(timeout);
  for (;;) {
    std::vector<pid_t> pids;
    for (const auto& p : paths) {
      std::string text = read_file(p);
      if (!text.empty() && text.back() == '\n') pids.push_back(std::atoi(text.c_str()));
    }
    if (pids.size() == paths.size() || deadline.expired()) {
      if (pids.size() != paths.size())
        ADD_FAILURE() << "only " << pids.size() << " of " << paths.size() << " pid files appeared";
      return pids;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<pid_t> still_alive_after(const std::vector<pid_t>& pids,
                                     std::chrono::milliseconds timeout) {
  Deadline deadline = Deadline::after(timeout);
  for (;;) {
    std::vector<pid_t> alive;
    for (pid_t p : pids)
      if (p > 0 && process_alive(p)) alive.push_back(p);
    if (alive.empty() || deadline.expired()) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void kill_all(const std::vector<pid_t>& pids) {
  for (pid_t p : pids)
    if (p > 0) ::kill(p, SIGKILL);
}

}  // namespace lockstep::testing
