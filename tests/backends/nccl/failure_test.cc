// Failures on the nccl backend: the duplicate-device check at init (failure catalogue entry 7),
// calls it cannot run, and peers that stop answering. Each error names the op, the rank and the
// fix, and comes within a time bound instead of a hang. Skips without enough GPUs.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "gpu_harness.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

void expect_duplicate_device_message(const std::string& what) {
  EXPECT_TRUE(contains(what, "ranks 0 and 1 on host ")) << what;
  EXPECT_TRUE(contains(what, "all use cuda:0")) << what;
  EXPECT_TRUE(contains(what, "LOCAL_RANK")) << what;
  EXPECT_TRUE(contains(what, "cudaSetDevice(local_rank)")) << what;
}

// After a rejected call the group works: all_reduce #0 (the rejected call took no number) runs.
void expect_usable(ProcessGroup& pg, int device) {
  TypedBuffer b(DType::f32, 4);
  DeviceBuffer db(b, device);
  WorkPtr work = pg.all_reduce(db.view());
  EXPECT_TRUE(contains(work->description(), "all_reduce #0 ")) << work->description();
  work->wait();
}

TEST(NcclFailure, EveryRankOnCuda0FailsAtInitNamingRanksHostDeviceAndFix) {
  LOCKSTEP_REQUIRE_GPUS(1);
  auto store = std::make_shared<HashStore>();
  std::atomic<int> failures{0};
  spawn(2, [&](int rank) {
    nccl::check_cuda(cudaSetDevice(0), "cudaSetDevice");  // the mistake: no LOCAL_RANK
    try {
      init_process_group(
          {.backend = "nccl", .rank = rank, .world_size = 2, .store = store, .timeout = 30s});
      ADD_FAILURE() << "rank " << rank << ": init succeeded on a shared GPU";
    } catch (const ConfigError& e) {
      expect_duplicate_device_message(e.what());
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);
}

TEST(NcclFailure, UnderAutoTheFirstOpOnASharedGpuFails) {
  LOCKSTEP_REQUIRE_GPUS(1);
  std::atomic<int> failures{0};
  spawn_gpu_groups(
      2, "auto",
      [&](ProcessGroup& pg, int device) {
        TypedBuffer b(DType::f32, 4);
        DeviceBuffer db(b, device);
        try {
          pg.all_reduce(db.view())->wait();
          ADD_FAILURE() << "rank " << pg.rank() << ": all_reduce ran on a shared GPU";
        } catch (const ConfigError& e) {
          expect_duplicate_device_message(e.what());
          ++failures;
        }
      },
      30s, [](int) { return 0; });
  EXPECT_EQ(failures.load(), 2);
}

TEST(NcclFailure, CallsTheBackendCannotRunAreRefused) {
  LOCKSTEP_REQUIRE_GPUS(1);
  spawn_gpu_groups(1, "nccl", [&](ProcessGroup& pg, int device) {
    std::vector<float> host(4);
    // Host memory on an nccl group: refused at the call, the group stays usable.
    try {
      (void)pg.all_reduce(view(host));
      ADD_FAILURE() << "host buffer accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "moves CUDA device memory only")) << e.what();
    }
    // Another device than the one bound at init.
    BufferView other{host.data(), host.size(), DType::f32, Device::cuda(device + 1)};
    try {
      (void)pg.all_reduce(other);
      ADD_FAILURE() << "buffer on another device accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "uses nccl on cuda:" + std::to_string(device))) << e.what();
    }
    TypedBuffer ok(DType::f32, 4);
    DeviceBuffer dok(ok, device);
    pg.all_reduce(dok.view())->wait();
  });
}

TEST(NcclFailure, HostMemoryTaggedAsDeviceAndBitwiseOpsFailTheOpClearly) {
  LOCKSTEP_REQUIRE_GPUS(1);
  spawn_gpu_groups(1, "nccl", [&](ProcessGroup& pg, int device) {
    std::vector<float> host(4);
    BufferView lie{host.data(), host.size(), DType::f32, Device::cuda(device)};
    try {
      (void)pg.all_reduce(lie);  // raised by the call, on this thread: nothing was queued
      ADD_FAILURE() << "host memory tagged as device accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "all_reduce #0 on rank 0")) << e.what();
      EXPECT_TRUE(contains(e.what(), "points to host memory")) << e.what();
    }
    expect_usable(pg, device);
  });
  spawn_gpu_groups(1, "nccl", [&](ProcessGroup& pg, int device) {
    TypedBuffer b(DType::i32, 4);
    DeviceBuffer db(b, device);
    try {
      (void)pg.all_reduce(db.view(), {.op = ReduceOp::bxor});
      ADD_FAILURE() << "bxor accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "bxor is not available on the nccl backend")) << e.what();
    }
    expect_usable(pg, device);
  });
}

TEST(NcclFailure, ARankThatNeverEntersTheOpTimesOutAndAbortsInsteadOfHanging) {
  LOCKSTEP_REQUIRE_GPUS(2);
  std::atomic<bool> done{false};
  spawn_gpu_groups(
      2, "nccl",
      [&](ProcessGroup& pg, int device) {
        if (pg.rank() == 1) {  // stays alive but never calls all_reduce
          for (auto t0 = Clock::now(); !done && Clock::now() - t0 < 60s;)
            std::this_thread::sleep_for(10ms);
          return;
        }
        TypedBuffer b(DType::f32, 1 << 20);
        DeviceBuffer db(b, device);
        auto start = Clock::now();
        try {
          pg.all_reduce(db.view(), {.timeout = 2s})->wait();
          ADD_FAILURE() << "all_reduce completed without rank 1";
        } catch (const TimeoutError& e) {
          EXPECT_TRUE(contains(e.what(), "all_reduce #0 on rank 0")) << e.what();
          EXPECT_TRUE(contains(e.what(), "communicator was aborted")) << e.what();
        }
        EXPECT_LT(Clock::now() - start, 30s);
        done = true;
      },
      30s);  // init's timeout; the op's own is 2 s
}

TEST(NcclFailure, APeersErrorReachesTheOthersThroughTheAbortNote) {
  LOCKSTEP_REQUIRE_GPUS(2);
  spawn_gpu_groups(2, "nccl", [&](ProcessGroup& pg, int device) {
    TypedBuffer b(DType::i32, 1024);
    DeviceBuffer db(b, device);
    if (pg.rank() == 1) {  // fails before it makes any NCCL call
      const std::string own = message_of<InvalidArgument>(
          [&] { pg.all_reduce(db.view(), {.op = ReduceOp::bor})->wait(); });
      EXPECT_TRUE(contains(own, "all_reduce #0")) << own;
      EXPECT_TRUE(contains(own, "reduce op bor is not available on the nccl backend")) << own;
      return;
    }
    auto start = Clock::now();
    try {
      pg.all_reduce(db.view(), {.timeout = 120s})->wait();
      ADD_FAILURE() << "all_reduce completed without rank 1";
    } catch (const NetworkError& e) {
      EXPECT_TRUE(contains(e.what(), "all_reduce #0 on rank 0")) << e.what();
      EXPECT_TRUE(contains(e.what(), "aborted by rank 1")) << e.what();
      EXPECT_TRUE(contains(e.what(), "bor is not available")) << e.what();
    }
    EXPECT_LT(Clock::now() - start, 20s) << "the note should end the wait within ~100 ms";
  });
}

}  // namespace
}  // namespace lockstep::testing
