// The nccl backend across real processes, each seeing only its own GPU through
// CUDA_VISIBLE_DEVICES, as launchers run jobs: every rank is on cuda:0 in its own numbering
// (the test binary re-runs itself in child mode). Collectives and a fused batch work; a rank
// SIGKILLed between two all_reduces makes the survivor fail within seconds, naming it; two
// processes that see the same GPU fail at init naming the duplicate device (the case the PCI
// bus id check exists for). Skips without enough GPUs.
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

const char* type_of(const std::exception& e) {
  return dynamic_cast<const NetworkError*>(&e)   ? "NetworkError"
         : dynamic_cast<const TimeoutError*>(&e) ? "TimeoutError"
         : dynamic_cast<const ConfigError*>(&e)  ? "ConfigError"
                                                 : "other";
}

// Every child: its one visible GPU is cuda:0.
std::shared_ptr<ProcessGroup> child_group() {
  nccl::check_cuda(cudaSetDevice(0), "cudaSetDevice");
  return init_process_group({.backend = "nccl"});
}

TEST(NcclChild, DISABLED_Collectives) {
  auto pg = child_group();
  const int rank = pg->rank(), peer = 1 - rank;
  TypedBuffer v(DType::f32, 1 << 20);
  for (size_t i = 0; i < v.count(); ++i) v.set(i, rank + 1.0);
  DeviceBuffer dv(v, 0);
  pg->all_reduce(dv.view())->wait();
  dv.download();
  TypedBuffer all(DType::f32, 2);
  DeviceBuffer dall(all, 0);
  pg->all_gather(dv.slice(0, 1), dall.view())->wait();
  dall.download();
  TypedBuffer mine(DType::f32, 1024), theirs(DType::f32, 1024);
  for (size_t i = 0; i < mine.count(); ++i) mine.set(i, 100.0 + rank);
  DeviceBuffer dm(mine, 0), dt(theirs, 0);
  std::vector<P2POp> batch = {P2POp::recv(dt.view(), peer), P2POp::send(dm.view(), peer)};
  pg->batch_isend_irecv(batch)->wait();
  dt.download();
  say(detail::concat("RESULT rank=", rank, " sum=", v.get(v.count() - 1), " gathered=", all.get(0),
                     ",", all.get(1), " received=", theirs.get(0)));
}

TEST(NcclChild, DISABLED_KilledPeer) {
  auto pg = child_group();
  const int rank = pg->rank();
  TypedBuffer b(DType::f32, 1 << 20);
  DeviceBuffer db(b, 0);
  pg->all_reduce(db.view())->wait();
  if (rank == 1) ::raise(SIGKILL);
  auto start = Clock::now();
  try {
    pg->all_reduce(db.view(), {.timeout = 120s})->wait();
    say("COMPLETED");
  } catch (const std::exception& e) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    say(detail::concat("CAUGHT ", type_of(e), " after_ms=", ms.count(), ": ", e.what()));
  }
}

TEST(NcclChild, DISABLED_SameGpu) {
  try {
    auto pg = child_group();
    say("CREATED");
  } catch (const std::exception& e) {
    say(detail::concat("CAUGHT ", type_of(e), ": ", e.what()));
  }
}

// Two children of test `child`, rank r seeing GPU visible[r].
std::vector<Child> start_pair(const std::string& child, const TcpStoreServer& server,
                              const std::vector<std::string>& visible) {
  std::vector<Child> children;
  for (int r = 0; r < 2; ++r)
    children.emplace_back(child_argv("NcclChild.DISABLED_" + child),
                          std::map<std::string, std::optional<std::string>>{
                              {"CUDA_VISIBLE_DEVICES", visible[static_cast<size_t>(r)]},
                              {"RANK", std::to_string(r)},
                              {"WORLD_SIZE", "2"},
                              {"LOCAL_RANK", std::to_string(r)},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(server.port())},
                              {"LOCKSTEP_USE_AGENT_STORE", "1"},
                              {"LOCKSTEP_TIMEOUT", "60"}});
  return children;
}

TEST(NcclProcess, EachProcessOnItsOwnGpuRunsCollectivesAndABatch) {
  LOCKSTEP_REQUIRE_GPUS(2);
  TcpStoreServer server({.bind_host = "127.0.0.1"});
  auto children = start_pair("Collectives", server, {"0", "1"});
  for (int r = 0; r < 2; ++r) {
    ProcessResult p = children[static_cast<size_t>(r)].wait(90s);
    ASSERT_FALSE(p.timed_out) << p.output;
    EXPECT_EQ(p.exit_code, 0) << p.output;
    EXPECT_TRUE(contains(p.output, detail::concat("RESULT rank=", r,
                                                  " sum=3 gathered=3,3 "
                                                  "received=",
                                                  101 - r)))
        << p.output;
  }
}

TEST(NcclProcess, ASigkilledPeerOnThisHostFailsTheSurvivorFastNamingIt) {
  LOCKSTEP_REQUIRE_GPUS(2);
  TcpStoreServer server({.bind_host = "127.0.0.1"});
  auto children = start_pair("KilledPeer", server, {"0", "1"});
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

// Both processes see physical GPU 0 as their cuda:0: the device ids differ from nothing a
// rank can see locally, only the PCI bus id tells them apart.
TEST(NcclProcess, TwoProcessesSeeingTheSameGpuFailAtInitNamingIt) {
  LOCKSTEP_REQUIRE_GPUS(1);
  TcpStoreServer server({.bind_host = "127.0.0.1"});
  auto children = start_pair("SameGpu", server, {"0", "0"});
  for (int r = 0; r < 2; ++r) {
    ProcessResult p = children[static_cast<size_t>(r)].wait(90s);
    ASSERT_FALSE(p.timed_out) << p.output;
    EXPECT_TRUE(contains(p.output, "CAUGHT ConfigError")) << p.output;
    EXPECT_TRUE(contains(p.output, "duplicate GPU: ranks 0 and 1")) << p.output;
    EXPECT_TRUE(contains(p.output, "cudaSetDevice(local_rank)")) << p.output;
  }
}

}  // namespace
}  // namespace lockstep::testing
