// The nccl backend across real processes, one GPU each (the test binary re-runs itself in child
// mode): a rank SIGKILLed between two all_reduces makes the survivor fail within seconds, naming
// it, instead of waiting for the deadline. Skips with fewer than 2 GPUs.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include "gpu_harness.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "support/child_mode.h"
#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Child: rank r on cuda:r; one all_reduce that works, then rank 1 dies and rank 0 reports how
// its second all_reduce ended ("CAUGHT <type> after_ms=<ms>: <message>").
TEST(NcclChild, DISABLED_KilledPeer) {
  const int rank = std::stoi(std::getenv("RANK"));
  nccl::check_cuda(cudaSetDevice(rank), "cudaSetDevice");
  auto pg = init_process_group({.backend = "nccl"});
  TypedBuffer b(DType::f32, 1 << 20);
  DeviceBuffer db(b, rank);
  pg->all_reduce(db.view())->wait();
  if (rank == 1) ::raise(SIGKILL);
  auto start = Clock::now();
  try {
    pg->all_reduce(db.view(), {.timeout = 120s})->wait();
    say("COMPLETED");
  } catch (const std::exception& e) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    const char* type = dynamic_cast<const NetworkError*>(&e)   ? "NetworkError"
                       : dynamic_cast<const TimeoutError*>(&e) ? "TimeoutError"
                                                               : "other";
    say(detail::concat("CAUGHT ", type, " after_ms=", ms.count(), ": ", e.what()));
  }
}

TEST(NcclProcess, ASigkilledPeerOnThisHostFailsTheSurvivorFastNamingIt) {
  LOCKSTEP_REQUIRE_GPUS(2);
  TcpStoreServer server({.bind_host = "127.0.0.1"});
  std::vector<Child> children;
  for (int r = 0; r < 2; ++r)
    children.emplace_back(child_argv("NcclChild.DISABLED_KilledPeer"),
                          std::map<std::string, std::optional<std::string>>{
                              {"RANK", std::to_string(r)},
                              {"WORLD_SIZE", "2"},
                              {"LOCAL_RANK", std::to_string(r)},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(server.port())},
                              {"LOCKSTEP_USE_AGENT_STORE", "1"},
                              {"LOCKSTEP_TIMEOUT", "120"}});
  ProcessResult killed = children[1].wait(90s);
  EXPECT_EQ(killed.signal, SIGKILL) << killed.output;
  ProcessResult survivor = children[0].wait(90s);
  ASSERT_FALSE(survivor.timed_out) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "CAUGHT NetworkError")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "all_reduce #1 on rank 0")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "rank 1 (pid ")) << survivor.output;
  size_t at = survivor.output.find("after_ms=");
  ASSERT_NE(at, std::string::npos) << survivor.output;
  EXPECT_LT(std::stoll(survivor.output.substr(at + 9)), 10'000) << survivor.output;
}

}  // namespace
}  // namespace lockstep::testing
