// The probe suite for a first GPU (issue 16): what would break on first contact, on one GPU
// (and two for the fused p2p probes). Every test skips, saying why, without enough GPUs.
// scripts/gpu_check.sh runs them and reports the latency line ("NCCL_LATENCY_US ...").
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "backends/nccl/backend.h"
#include "comm/failure.h"
#include "gpu_harness.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// Raw device memory for the probes that need more than a TypedBuffer.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t n) : n_(n) { nccl::check_cuda(cudaMalloc(&p_, n), "cudaMalloc"); }
  ~DeviceBytes() { cudaFree(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return p_; }
  BufferView u8() const { return BufferView{p_, n_, DType::u8, Device::cuda(0)}; }
  uint8_t byte_at(size_t i) const {
    uint8_t b = 0;
    nccl::check_cuda(cudaMemcpy(&b, static_cast<char*>(p_) + i, 1, cudaMemcpyDeviceToHost),
                     "cudaMemcpy");
    return b;
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

std::shared_ptr<ProcessGroup> solo_group(const std::string& name,
                                         std::chrono::milliseconds t = 60s) {
  nccl::check_cuda(cudaSetDevice(0), "cudaSetDevice");
  return init_process_group({.backend = "nccl",
                             .rank = 0,
                             .world_size = 1,
                             .store = std::make_shared<HashStore>(),
                             .timeout = t,
                             .group_name = name});
}

// A long chain of copies on the legacy default stream, then a memset of the input, then an
// out-of-place all_reduce: the NCCL stream must wait for the memset ([Stream order]), else it
// copies the input's old zeros.
TEST(NcclProbe, StreamOrderAfterTheCallersDeviceWork) {
  LOCKSTEP_REQUIRE_GPUS(1);
  auto pg = solo_group("probe-order");
  constexpr size_t kJunk = 256u << 20, kN = 64u << 20;
  DeviceBytes a(kJunk), b(kJunk), in(kN), out(kN);
  nccl::check_cuda(cudaMemset(in.get(), 0, kN), "cudaMemset");
  nccl::check_cuda(cudaMemset(out.get(), 0, kN), "cudaMemset");
  nccl::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (int i = 0; i < 200; ++i)  // ~100 GB of copies: tens of milliseconds of device work
    nccl::check_cuda(cudaMemcpyAsync(b.get(), a.get(), kJunk, cudaMemcpyDeviceToDevice, 0),
                     "cudaMemcpyAsync");
  nccl::check_cuda(cudaMemsetAsync(in.get(), 7, kN, 0), "cudaMemsetAsync");
  pg->all_reduce(in.u8(), out.u8())->wait();
  EXPECT_EQ(out.byte_at(0), 7);
  EXPECT_EQ(out.byte_at(kN - 1), 7);
}

GroupConfig lonely_config(const std::shared_ptr<Store>& store, const std::string& name,
                          std::chrono::milliseconds timeout) {
  return GroupConfig{.name = name,
                     .rank = 0,
                     .size = 2,
                     .store = store,
                     .backend = "nccl",
                     .timeout = timeout,
                     .advertise_address = "127.0.0.1",
                     .hostname = "localhost"};
}

// Rank 1 of a HashStore group never joins: init gives up at its bound, naming it.
TEST(NcclProbe, InitTimesOutWithinItsBoundWhenAPeerNeverJoins) {
  LOCKSTEP_REQUIRE_GPUS(1);
  nccl::check_cuda(cudaSetDevice(0), "cudaSetDevice");
  auto store = std::make_shared<HashStore>();
  auto start = Clock::now();
  expect_error_naming<TimeoutError>(
      [&] { (void)make_nccl_backend(lonely_config(store, "probe-lonely", 3s)); },
      {"nccl init on rank 0", "ranks [1]", "never joined the NCCL communicator"});
  auto s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(s, 2.5);
  EXPECT_LT(s, 8.0);
}

// With rank 1's abort note in the store, rank 0 stops waiting at once.
TEST(NcclProbe, AnAbortNoteEndsInitFast) {
  LOCKSTEP_REQUIRE_GPUS(1);
  nccl::check_cuda(cudaSetDevice(0), "cudaSetDevice");
  auto store = std::make_shared<HashStore>();
  write_abort_note(*store, "probe-noted", 1, "fake-host", "ncclGetUniqueId failed (probe)");
  auto start = Clock::now();
  expect_error_naming<NetworkError>(
      [&] { (void)make_nccl_backend(lonely_config(store, "probe-noted", 60s)); },
      {"nccl init on rank 0", "aborted by rank 1", "ncclGetUniqueId failed (probe)"});
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}

TEST(NcclProbe, AHostBufferTaggedCudaIsAnInvalidArgument) {
  LOCKSTEP_REQUIRE_GPUS(1);
  auto pg = solo_group("probe-types");
  std::vector<float> host(16, 1.0f);
  BufferView lie{host.data(), host.size(), DType::f32, Device::cuda(0)};
  expect_error_naming<InvalidArgument>([&] { (void)pg->all_reduce(lie); },
                                       {"all_reduce #0 on rank 0", "points to host memory"});
  TypedBuffer t(DType::f32, 16);
  DeviceBuffer d(t, 0);
  pg->all_reduce(d.view())->wait();  // refused on the caller's thread: the group is intact
}

// More than 2^31 bytes (and elements, as u8): counts travel as size_t all the way to NCCL.
TEST(NcclProbe, AllReduceAndBroadcastOfMoreThan2GiB) {
  LOCKSTEP_REQUIRE_GPUS(1);
  size_t free_bytes = 0, total = 0;
  cudaSetDevice(0);
  cudaMemGetInfo(&free_bytes, &total);
  constexpr size_t kN = (size_t{1} << 31) + 4096;
  if (free_bytes < 2 * kN + (1u << 30)) GTEST_SKIP() << "needs 5 GiB of free device memory";
  auto pg = solo_group("probe-large");
  DeviceBytes in(kN), out(kN);
  nccl::check_cuda(cudaMemset(in.get(), 5, kN), "cudaMemset");
  nccl::check_cuda(cudaMemset(out.get(), 0, kN), "cudaMemset");
  pg->all_reduce(in.u8(), out.u8())->wait();
  EXPECT_EQ(out.byte_at(0), 5);
  EXPECT_EQ(out.byte_at(kN - 1), 5);
  pg->broadcast(in.u8(), {.root = 0})->wait();
  EXPECT_EQ(in.byte_at(kN - 1), 5);
}

// 20 rounds of init, one op and destroy leave device memory where the second round found it.
TEST(NcclProbe, TwentyInitOpDestroyRoundsKeepDeviceMemoryStable) {
  LOCKSTEP_REQUIRE_GPUS(1);
  size_t after_first = 0, now = 0, total = 0;
  for (int round = 0; round < 20; ++round) {
    {
      auto pg = solo_group("probe-round-" + std::to_string(round));
      TypedBuffer t(DType::f32, 1024);
      DeviceBuffer d(t, 0);
      pg->all_reduce(d.view())->wait();
    }
    cudaDeviceSynchronize();
    cudaMemGetInfo(round == 0 ? &after_first : &now, &total);
  }
  const double grew_mib = (static_cast<double>(after_first) - static_cast<double>(now)) / (1 << 20);
  std::printf("NCCL_MEMORY_GROWTH_MIB %.1f\n", grew_mib);
  EXPECT_LT(grew_mib, 64.0) << "device memory shrank by " << grew_mib << " MiB over 19 rounds";
}

// µs per 4-byte all_reduce, issue to Work completion: lockstep's per-op overhead on nccl.
TEST(NcclProbe, LatencyOfAFourByteAllReduce) {
  LOCKSTEP_REQUIRE_GPUS(1);
  auto pg = solo_group("probe-latency");
  TypedBuffer t(DType::f32, 1);
  DeviceBuffer d(t, 0);
  for (int i = 0; i < 200; ++i) pg->all_reduce(d.view())->wait();
  constexpr int kIters = 2000;
  auto start = Clock::now();
  for (int i = 0; i < kIters; ++i) pg->all_reduce(d.view())->wait();
  double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kIters;
  std::printf("NCCL_LATENCY_US %.2f (size 1, %s)\n", us,
              settings().nccl_nonblocking ? "non-blocking" : "blocking");
  RecordProperty("latency_us", std::to_string(us));
  EXPECT_LT(us, 1000.0);
}

// Both ranks receive first, in one batch: only a fused group (one ncclGroupStart/End) completes.
TEST(NcclProbe, ABatchWhereBothRanksReceiveFirstCompletes) {
  LOCKSTEP_REQUIRE_GPUS(2);
  spawn_gpu_groups(2, "nccl", [](ProcessGroup& pg, int device) {
    const int peer = 1 - pg.rank();
    TypedBuffer mine(DType::f32, 1 << 20), theirs(DType::f32, 1 << 20);
    for (size_t i = 0; i < mine.count(); ++i) mine.set(i, pg.rank() + 1.0);
    DeviceBuffer m(mine, device), th(theirs, device);
    std::vector<P2POp> batch = {P2POp::recv(th.view(), peer), P2POp::send(m.view(), peer)};
    pg.batch_isend_irecv(batch, 30s)->wait();
    th.download();
    EXPECT_EQ(theirs.get(0), peer + 1.0);
    EXPECT_EQ(theirs.get(theirs.count() - 1), peer + 1.0);
  });
}

// isend and irecv one by one, in matching order (rank 0 sends first, rank 1 receives first).
// Both receiving first needs batch_isend_irecv, as in PyTorch (docs/nccl.md).
TEST(NcclProbe, OneByOneSendsAndRecvsInMatchingOrderComplete) {
  LOCKSTEP_REQUIRE_GPUS(2);
  spawn_gpu_groups(2, "nccl", [](ProcessGroup& pg, int device) {
    const int peer = 1 - pg.rank();
    TypedBuffer mine(DType::f32, 4096), theirs(DType::f32, 4096);
    for (size_t i = 0; i < mine.count(); ++i) mine.set(i, pg.rank() + 10.0);
    DeviceBuffer m(mine, device), th(theirs, device);
    WorkPtr first = pg.rank() == 0 ? pg.isend(m.view(), peer, {.timeout = 30s})
                                   : pg.irecv(th.view(), peer, {.timeout = 30s});
    WorkPtr second = pg.rank() == 0 ? pg.irecv(th.view(), peer, {.timeout = 30s})
                                    : pg.isend(m.view(), peer, {.timeout = 30s});
    first->wait();
    second->wait();
    th.download();
    EXPECT_EQ(theirs.get(0), peer + 10.0);
  });
}

}  // namespace
}  // namespace lockstep::testing
