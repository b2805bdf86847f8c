// DistributedDataParallel on a CUDA model ([Devices] in lockstep/torch/ddp.h; docs/ddp.md, "GPU
// models"): buckets on the GPU, reduced through the nccl route of backend auto, each op ordered
// after torch's current stream. One rank per GPU, as NCCL requires, so one rank on the GPU
// machine's one GPU: each test compares DDP step by step with plain training of the same model
// on the same GPU, which a bucket read before its gradients were written, or written back
// before its all_reduce finished, would break. Without a GPU, or in a build without the nccl
// backend, every test skips.
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/torch/comm_hooks.h"
#include "lockstep/torch/ddp.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "torch/ddp_harness.h"

namespace lockstep::torch {
namespace {

using namespace ddp_harness;
using lockstep::testing::contains;

#ifdef LOCKSTEP_TEST_HAS_NCCL
constexpr bool kHasNccl = true;
#else
constexpr bool kHasNccl = false;
#endif

#define SKIP_WITHOUT_GPU()                                                                    \
  do {                                                                                        \
    if (!kHasNccl) GTEST_SKIP() << "lockstep was built without its nccl backend";             \
    if (!::torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the GPU tests skip"; \
  } while (0)

const ::torch::Device kGpu(::torch::kCUDA, 0);

// Trains a copy of `net` plainly and one under DDP (one rank, backend auto) on the GPU for kSteps
// and returns the largest relative difference between their parameters. `step(model, t)` runs
// one forward and backward; `in_stream` runs everything on a stream of torch's pool, which CUDA
// does not order after the legacy default stream.
template <class Net, class Step>
double train_both(const DdpOptions& options, Step step, bool in_stream = false) {
  at::set_num_threads(1);
  ::torch::manual_seed(0);
  Net reference, replica;
  load(*replica, snapshot(*reference));
  reference->to(kGpu);
  replica->to(kGpu);
  // The current stream is per thread: the reference trains on this one, DDP on spawn_groups'.
  auto enter_stream = [in_stream](std::optional<c10::StreamGuard>& guard) {
    if (in_stream)
      guard.emplace(c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA)
                        .getStreamFromGlobalPool(kGpu, /*isHighPriority=*/false));
  };
  std::optional<c10::StreamGuard> guard;
  enter_stream(guard);
  const std::vector<at::Tensor> initial = snapshot(*reference);
  auto ref_opt = make_sgd(*reference);
  for (int t = 0; t < kSteps; ++t) {
    ref_opt.zero_grad();
    step(reference, t);
    ref_opt.step();
  }
  // On the host, read on this thread's stream: the spawned thread's is another.
  std::vector<at::Tensor> expected = snapshot(*reference);
  for (at::Tensor& t : expected) t = t.cpu();
  EXPECT_GT(relative_diff(initial[0].cpu(), expected[0]), 1e-3) << "training moved nothing";
  double worst = 0;
  lockstep::testing::spawn_groups(
      1,
      [&](ProcessGroup& pg) {
        std::optional<c10::StreamGuard> rank_guard;
        enter_stream(rank_guard);
        DistributedDataParallel ddp(replica, share(pg), options);
        auto opt = make_sgd(*replica);
        for (int t = 0; t < kSteps; ++t) {
          opt.zero_grad();
          step(ddp, t);
          opt.step();
        }
        EXPECT_EQ(ddp.stats().synced_backwards, kSteps);
        EXPECT_GE(ddp.stats().buckets_launched, kSteps);
        for (const auto& p : replica->parameters()) {  // undefined: unused in the last step
          if (p.grad().defined()) EXPECT_TRUE(p.grad().is_cuda()) << "the gradient left the GPU";
        }
        const std::vector<at::Tensor> got = snapshot(*replica);
        for (size_t i = 0; i < got.size(); ++i) {
          if (!got[i].is_floating_point()) continue;
          worst = std::max(worst, relative_diff(got[i].cpu(), expected[i]));
        }
      },
      "auto");
  std::printf("[ddp cuda] largest relative difference to plain training: %.2g\n", worst);
  return worst;
}

auto mlp_step(const Data& d) {
  return [&d](auto& model, int t) { mse(model(d.x[t].to(kGpu)), d.y[t].to(kGpu)).backward(); };
}

TEST(DdpCuda, TrainsLikePlainTrainingOnTheGpu) {
  SKIP_WITHOUT_GPU();
  Data d = make_data(1, 1, {8});
  EXPECT_LE(train_both<Mlp>({.first_bucket_bytes = 256, .bucket_bytes = 1024}, mlp_step(d)), 1e-6);
}

TEST(DdpCuda, OnAPoolStreamEachBucketWaitsForItsGradients) {
  SKIP_WITHOUT_GPU();
  Data d = make_data(1, 1, {8});
  EXPECT_LE(train_both<Mlp>({.first_bucket_bytes = 256, .bucket_bytes = 1024}, mlp_step(d),
                            /*in_stream=*/true),
            1e-6);
}

TEST(DdpCuda, GradientAsBucketViewKeepsTheGradientsInDeviceBuckets) {
  SKIP_WITHOUT_GPU();
  Data d = make_data(1, 1, {8});
  EXPECT_LE(train_both<Mlp>({.gradient_as_bucket_view = true}, mlp_step(d)), 1e-6);
}

TEST(DdpCuda, Fp16HookNarrowsOnTheDeviceWithinOnePercent) {
  SKIP_WITHOUT_GPU();
  Data d = make_data(1, 1, {8});
  EXPECT_LE(train_both<Mlp>({.comm_hook = fp16_compress_hook()}, mlp_step(d)), 1e-2);
}

TEST(DdpCuda, AParameterUnusedOnSomeStepsIsLeftAsPlainTrainingLeavesIt) {
  SKIP_WITHOUT_GPU();
  Data d = make_data(1, 1, {8});
  auto step = [&d](auto& model, int t) {
    mse(model(d.x[t].to(kGpu), uses_extra(0, t)), d.y[t].to(kGpu)).backward();
  };
  EXPECT_LE(train_both<Branchy>({.find_unused_parameters = true}, step), 1e-6);
}

// Building DDP over `net` on one rank of `backend` must throw InvalidArgument naming each needle.
void expect_refused(Mlp& net, const std::string& backend, const std::vector<std::string>& needles) {
  lockstep::testing::spawn_groups(
      1,
      [&](ProcessGroup& pg) {
        try {
          DistributedDataParallel ddp(net, share(pg), {});
          ADD_FAILURE() << "expected InvalidArgument";
        } catch (const InvalidArgument& e) {
          for (const std::string& needle : needles)
            EXPECT_TRUE(contains(e.what(), needle)) << e.what();
        }
      },
      backend);
}

TEST(DdpCuda, AModelOnTwoDevicesIsRefusedNamingBoth) {
  SKIP_WITHOUT_GPU();
  Mlp net;
  net->fc2->to(kGpu);
  expect_refused(net, "auto", {"'fc2.weight' is on cuda:0", "'fc1.weight' is on cpu"});
}

TEST(DdpCuda, AnNcclOnlyGroupIsRefusedNamingBackendAuto) {
  SKIP_WITHOUT_GPU();
  Mlp net;
  net->to(kGpu);
  expect_refused(net, "nccl", {"backend auto"});
}

}  // namespace
}  // namespace lockstep::torch
