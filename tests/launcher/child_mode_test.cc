// The rank program for launcher tests that need real collectives. Launcher tests start this same
// test binary under `lockstep run` with LOCKSTEP_LAUNCHER_TEST_CHILD set and
// --gtest_filter=LauncherChild.DISABLED_Main; being DISABLED_, an ordinary test run never lists it.
//
// Modes:
//   store      connect to the launcher's store at LOCKSTEP_STORE_ADDR:LOCKSTEP_STORE_PORT as a
//              plain client, and
//              meet every other rank there (each sets a key, all wait for all).
//   allreduce  init_process_group() from the environment and all_reduce a float buffer;
//              element i must equal (i + 1) * W * (W + 1) / 2.
//   stall      three all_reduces; the last rank sleeps 60 s before its third, so the others time
//              out in it (with LOCKSTEP_TIMEOUT set low) and the launcher stops the sleeper.
//   uncaught   every rank meets the others in the store; then rank 1 dies of an uncaught
//              exception, and every other rank waits for the launcher's SIGTERM and then dies of
//              an uncaught exception of its own (a rank that aborts while being stopped).
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/group/init.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

void meet_in_store() {
  int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  TcpStore store(TcpStoreOptions{.host = std::getenv("LOCKSTEP_STORE_ADDR"),
                                 .port = static_cast<uint16_t>(env_int("LOCKSTEP_STORE_PORT")),
                                 .timeout = std::chrono::seconds(20)});
  std::string run = std::getenv("LOCKSTEP_RUN_ID");
  store.set("launcher_test/" + run + "/rank_" + std::to_string(rank), "here");
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r)
    keys.push_back("launcher_test/" + run + "/rank_" + std::to_string(r));
  store.wait(keys, std::chrono::seconds(20));
  std::printf("STORE_OK rank=%d world=%d\n", rank, world);
}

void all_reduce_check() {
  auto group = init_process_group(InitOptions{.timeout = std::chrono::seconds(30)});
  const int n = group->size();
  std::vector<float> data(1000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>((group->rank() + 1) * (i + 1));
  group->all_reduce(view(data))->wait();
  size_t wrong = 0;
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != static_cast<float>((i + 1) * n * (n + 1) / 2)) ++wrong;
  ASSERT_EQ(wrong, 0u) << "rank " << group->rank() << ": data[0] = " << data[0];
  std::printf("ALLREDUCE_OK rank=%d world=%d first=%g\n", group->rank(), n, data[0]);
}

void stall_before_third() {
  auto group = init_process_group();
  std::vector<float> data(1, 1.0f);
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && group->rank() == group->size() - 1) {
      std::printf("STALLING rank=%d\n", group->rank());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    group->all_reduce(view(data))->wait();
  }
  std::printf("NO_STALL rank=%d\n", group->rank());
}

// Throws on a thread of its own, so that nothing catches it: std::terminate, then SIGABRT.
[[noreturn]] void die_uncaught(const std::string& what) {
  std::thread([what] { throw NetworkError(what); }).join();
  std::abort();  // not reached
}

void uncaught() {
  const int rank = env_int("RANK");
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  if (rank != 1) pthread_sigmask(SIG_BLOCK, &term, nullptr);  // before anyone can fail
  meet_in_store();
  if (rank == 1) die_uncaught("boom from rank 1");
  int sig = 0;
  sigwait(&term, &sig);
  die_uncaught("rank " + std::to_string(rank) + " gave up when stopped");
}

TEST(LauncherChild, DISABLED_Main) {
  const char* mode = std::getenv("LOCKSTEP_LAUNCHER_TEST_CHILD");
  ASSERT_NE(mode, nullptr) << "runs only as a rank started by the launcher tests";
  std::string m = mode;
  if (m == "store")
    meet_in_store();
  else if (m == "allreduce")
    all_reduce_check();
  else if (m == "stall")
    stall_before_third();
  else if (m == "uncaught")
    uncaught();
  else
    FAIL() << "unknown LOCKSTEP_LAUNCHER_TEST_CHILD mode " << m;
  std::fflush(stdout);
}

}  // namespace
}  // namespace lockstep
