// What the nccl router (backend auto with nccl built) refuses on the caller's thread, leaving the
// group usable: CUDA buffers on a machine without a GPU, and a batch_isend_irecv that mixes CUDA
// and host buffers. Under LOCKSTEP_DEBUG=DETAIL (a child process, since the level is read once
// per process) a group whose device ops cannot run fails each such call once, clearly, and its
// host collectives keep passing the fingerprint check.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_harness.h"
#include "lockstep/core/error.h"
#include "support/child_mode.h"
#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// Each rank: a CUDA all_reduce and a CUDA batch are refused naming the rank and the reason; a
// mixed batch is refused naming the split; a host all_reduce then runs.
void refusals(ProcessGroup& pg) {
  std::vector<float> v(8, 1.0f), w(8, 0.0f);
  BufferView cuda_v{v.data(), v.size(), DType::f32, Device::cuda(0)};
  BufferView cuda_w{w.data(), w.size(), DType::f32, Device::cuda(0)};
  const int peer = 1 - pg.rank();
  const std::string me = "rank " + std::to_string(pg.rank());
  expect_error_naming<InvalidArgument>(
      [&] { (void)pg.all_reduce(cuda_v); },
      {"all_reduce: " + me + " passed a cuda:0 buffer", "sees no CUDA device"});
  std::vector<P2POp> batch = {P2POp::recv(cuda_w, peer), P2POp::send(cuda_v, peer)};
  expect_error_naming<InvalidArgument>(
      [&] { (void)pg.batch_isend_irecv(batch); },
      {"batch_isend_irecv: " + me + " passed a cuda:0 buffer", "sees no CUDA device"});
  std::vector<P2POp> mixed = {P2POp::recv(view(w), peer), P2POp::send(cuda_v, peer)};
  expect_error_naming<InvalidArgument>([&] { (void)pg.batch_isend_irecv(mixed); },
                                       {"batch_isend_irecv: " + me +
                                            " mixed 1 CUDA buffer(s) "
                                            "with 1 host buffer(s)",
                                        "split it into two batches"});
  pg.all_reduce(view(v))->wait();  // the group is intact, and numbering too
  EXPECT_EQ(v[0], 2.0f);
}

TEST(NcclRefusals, AutoWithoutGpuRefusesCudaCallsAndMixedBatchesAndStaysUsable) {
  if (gpu_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  spawn_groups(2, refusals, "auto");
}

TEST(NcclRefusalsChild, DISABLED_UnderDetail) {
  spawn_groups(2, refusals, "auto");
  std::printf("DETAIL_CHILD_DONE failures=%d\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->result()->Failed() ? 1 : 0);
  std::fflush(stdout);
}

TEST(NcclRefusals, UnderDetailAGroupWhoseDeviceOpsCannotRunFailsThemOnceEachClearly) {
  if (gpu_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  Child child(child_argv("NcclRefusalsChild.DISABLED_UnderDetail"),
              std::map<std::string, std::optional<std::string>>{{"LOCKSTEP_DEBUG", "DETAIL"}});
  ProcessResult r = child.wait(120s);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "DETAIL_CHILD_DONE failures=0")) << r.output;
  EXPECT_TRUE(contains(r.output, "collective fingerprints checked")) << r.output;
}

}  // namespace
}  // namespace lockstep::testing
