// [Dump on SIGTERM] (src/debug/signal_dump.h) in a real forked process: SIGTERM writes the dump of
// every live group and still ends the process by SIGTERM; a program's own SIGTERM handler is left
// alone.
#include "debug/signal_dump.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "debug/watchdog.h"
#include "lockstep/store/hash_store.h"
#include "support/temp_dir.h"

namespace lockstep::debug {
namespace {

using lockstep::testing::TempDir;

// Forks a child that runs `setup`, starts two groups' watchdogs, says it is ready on a pipe and
// waits for signals. Sends it SIGTERM once ready and returns its wait status.
int run_and_terminate(const std::string& trace_dir, void (*setup)()) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    setup();
    auto store = std::make_shared<HashStore>();
    Watchdog first(WatchdogOptions{.group = "default", .store = store, .trace_dir = trace_dir});
    Watchdog second(WatchdogOptions{.group = "default/1", .store = store, .trace_dir = trace_dir});
    (void)!::write(ready[1], "x", 1);
    for (int i = 0; i < 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::_exit(3);  // never reached when the signal works
  }
  ::close(ready[1]);
  char byte = 0;
  (void)!::read(ready[0], &byte, 1);
  ::close(ready[0]);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::vector<std::string> dumps_in(const std::string& dir) {
  std::vector<std::string> texts;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  return texts;
}

TEST(SignalDump, SigtermDumpsEveryLiveGroupThenEndsTheProcessBySigterm) {
  TempDir dir;
  int status = run_and_terminate(dir.path(), [] {});
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  auto dumps = dumps_in(dir.path());
  ASSERT_EQ(dumps.size(), 2u) << "one dump per live group";
  for (const auto& d : dumps) EXPECT_NE(d.find("stopped by signal 15"), std::string::npos) << d;
}

TEST(SignalDump, AProgramsOwnSigtermHandlerIsLeftAlone) {
  TempDir dir;
  int status = run_and_terminate(dir.path(), [] { ::signal(SIGTERM, [](int) { ::_exit(42); }); });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 42) << "the program's handler ran";
  EXPECT_TRUE(dumps_in(dir.path()).empty());
}

}  // namespace
}  // namespace lockstep::debug
