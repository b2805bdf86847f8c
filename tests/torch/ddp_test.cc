// DistributedDataParallel against single-process training: K steps of SGD with momentum on W ranks
// (threads, each with its own ProcessGroup) must give the parameters that one process gets on
// the concatenated batch.
//
// [Reference] For models whose forward treats samples independently (the MLPs), the reference is
// literally one forward over the concatenated batch. Two cases need a per-shard reference:
//   - BatchNorm in training mode normalises by the statistics of the batch it is given, so under
//     DDP each rank normalises by its local batch (as PyTorch DDP without SyncBatchNorm does). The
//     single-process equivalent runs one forward per shard and averages the shard losses. Running
//     statistics: with broadcast_buffers every rank starts each iteration from rank 0's, and rank
//     0 updates them from its own shard, so the reference updates them from shard 0 only (its
//     other shards run with momentum 0, which leaves them bit-for-bit unchanged).
//   - A data-dependent branch (the unused-parameter model) runs per shard with that shard's flag.
// With equal shard sizes the mean of the shard means is the mean over the concatenated batch, so
// both formulations are "single-process training on the concatenated batch".
#include "lockstep/torch/ddp.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "torch/ddp_harness.h"

namespace lockstep::torch {
namespace {

using lockstep::testing::count_of;

using namespace ddp_harness;

class DdpEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(DdpEquivalence, Mlp) {
  const int world = GetParam();
  Data d = make_data(world, 1, {8});
  expect_equivalent<Mlp>(
      world, {},
      [&](auto& ddp, int r, int t) { mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward(); },
      [&](Mlp& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); }, 1e-5,
      [](auto& ddp, Mlp&, int) {
        EXPECT_EQ(ddp.stats().synced_backwards, kSteps);
        EXPECT_EQ(ddp.stats().bucket_rebuilds, 0);  // one bucket: nothing to reorder
      });
}

// The reference's BatchNorm step: one forward per shard (and per micro-batch), running
// statistics updated from shard 0 only (see [Reference]).
at::Tensor bn_shard_forward(BnNet& net, const Data& d, int t, int r, int micro) {
  net->bn->options.momentum(r == 0 ? 0.1 : 0.0);
  at::Tensor out = net(d.shard_x(t, r, micro));
  net->bn->options.momentum(0.1);
  return mse(out, d.shard_y(t, r, micro));
}

// After training, one more forward with momentum 0 on every rank: DDP broadcasts rank 0's
// buffers before it and the forward changes nothing, so every rank must hold rank 0's buffers.
void expect_buffers_broadcast(DistributedDataParallel<BnNet>& ddp, BnNet& net, int rank,
                              const Data& d) {
  std::vector<at::Tensor> before_rank0 = {net->bn->running_mean.clone(),
                                          net->bn->running_var.clone()};
  net->bn->options.momentum(0.0);
  ddp(d.shard_x(0, rank));
  net->bn->options.momentum(0.1);
  auto& pg = ddp.process_group();
  for (at::Tensor stat : {net->bn->running_mean, net->bn->running_var}) {
    at::Tensor mine = stat.clone();
    at::Tensor all = ::torch::zeros({pg.size(), mine.numel()});
    pg.all_gather(BufferView{mine.data_ptr(), static_cast<size_t>(mine.numel()), DType::f32},
                  BufferView{all.data_ptr(), static_cast<size_t>(all.numel()), DType::f32})
        ->wait();
    for (int q = 1; q < pg.size(); ++q)
      EXPECT_TRUE(all[q].equal(all[0])) << "rank " << q << " vs 0";
  }
  if (rank == 0) EXPECT_TRUE(net->bn->running_mean.equal(before_rank0[0]));
}

TEST_P(DdpEquivalence, CnnWithBatchNormAndBroadcastBuffers) {
  const int world = GetParam();
  Data d = make_data(world, 1, {1, 8, 8});
  expect_equivalent<BnNet>(
      world, {.broadcast_buffers = true},
      [&](auto& ddp, int r, int t) { mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward(); },
      [&](BnNet& net, int t) {
        at::Tensor loss = bn_shard_forward(net, d, t, 0, 0);
        for (int r = 1; r < world; ++r) loss = loss + bn_shard_forward(net, d, t, r, 0);
        (loss / world).backward();
      },
      1e-5,
      [&](auto& ddp, BnNet& net, int rank) {
        EXPECT_EQ(ddp.stats().buffer_broadcasts, kSteps);
        expect_buffers_broadcast(ddp, net, rank, d);
      });
}

TEST_P(DdpEquivalence, TwoForwardsBeforeOneBackwardWithBatchNorm) {
  const int world = GetParam();
  Data d = make_data(world, 2, {1, 8, 8});
  expect_equivalent<BnNet>(
      world, {.broadcast_buffers = true},
      [&](auto& ddp, int r, int t) {
        at::Tensor first = mse(ddp(d.shard_x(t, r, 0)), d.shard_y(t, r, 0));
        at::Tensor second = mse(ddp(d.shard_x(t, r, 1)), d.shard_y(t, r, 1));
        ((first + second) / 2).backward();
      },
      [&](BnNet& net, int t) {
        at::Tensor loss = ::torch::zeros({});
        for (int r = 0; r < world; ++r) {
          at::Tensor first = bn_shard_forward(net, d, t, r, 0);  // in this order, as on rank r
          at::Tensor second = bn_shard_forward(net, d, t, r, 1);
          loss = loss + (first + second) / 2;
        }
        (loss / world).backward();
      },
      1e-5,
      [](auto& ddp, BnNet&, int) {
        EXPECT_EQ(ddp.stats().buffer_broadcasts, kSteps);  // once per iteration, not per forward
      });
}

// The unused-parameter model, per shard (see [Reference]).
void branchy_reference(Branchy& net, const Data& d, int t) {
  at::Tensor loss = ::torch::zeros({});
  for (int r = 0; r < d.world; ++r) {
    loss = loss + mse(net(d.shard_x(t, r), uses_extra(r, t)), d.shard_y(t, r));
  }
  (loss / d.world).backward();
}

TEST_P(DdpEquivalence, ParameterUnusedOnSomeIterationsAndRanks) {
  const int world = GetParam();
  Data d = make_data(world, 1, {8});
  ::testing::internal::CaptureStderr();  // the warning is checked in DdpWarnings
  expect_equivalent<Branchy>(
      world, {},
      [&](auto& ddp, int r, int t) {
        mse(ddp(d.shard_x(t, r), uses_extra(r, t)), d.shard_y(t, r)).backward();
      },
      [&](Branchy& net, int t) { branchy_reference(net, d, t); }, 1e-5,
      [](auto& ddp, Branchy&, int) {
        // Without find_unused_parameters, an iteration that skips the branch sends its bucket
        // only at the end of backward.
        EXPECT_LT(ddp.stats().early_launched, ddp.stats().buckets_launched);
      });
  ::testing::internal::GetCapturedStderr();
}

TEST_P(DdpEquivalence, FindUnusedParametersLaunchesEveryBucketDuringBackward) {
  const int world = GetParam();
  Data d = make_data(world, 1, {8});
  ::testing::internal::CaptureStderr();
  expect_equivalent<Branchy>(
      world, {.find_unused_parameters = true},
      [&](auto& ddp, int r, int t) {
        mse(ddp(d.shard_x(t, r), uses_extra(r, t)), d.shard_y(t, r)).backward();
      },
      [&](Branchy& net, int t) { branchy_reference(net, d, t); }, 1e-5,
      [](auto& ddp, Branchy&, int) {
        EXPECT_EQ(ddp.stats().early_launched, ddp.stats().buckets_launched);
        EXPECT_GE(ddp.stats().buckets_launched, kSteps);
      });
  ::testing::internal::GetCapturedStderr();
}

TEST_P(DdpEquivalence, NoSyncAccumulatesOverFourMicroBatches) {
  const int world = GetParam();
  constexpr int kMicro = 4;
  Data d = make_data(world, kMicro, {8});
  expect_equivalent<Mlp>(
      world, {},
      [&](auto& ddp, int r, int t) {
        for (int m = 0; m < kMicro - 1; ++m) {
          auto no_sync = ddp.no_sync();
          (mse(ddp(d.shard_x(t, r, m)), d.shard_y(t, r, m)) / kMicro).backward();
        }
        (mse(ddp(d.shard_x(t, r, kMicro - 1)), d.shard_y(t, r, kMicro - 1)) / kMicro).backward();
      },
      [&](Mlp& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); }, 1e-5,
      [](auto& ddp, Mlp&, int) { EXPECT_EQ(ddp.stats().synced_backwards, kSteps); });
}

TEST_P(DdpEquivalence, GradientAsBucketView) {
  const int world = GetParam();
  Data d = make_data(world, 1, {8});
  // Small buckets, so the layout has several buckets of several parameters.
  DdpOptions options{
      .first_bucket_bytes = 300, .bucket_bytes = 1200, .gradient_as_bucket_view = true};
  expect_equivalent<Mlp>(
      world, options,
      [&](auto& ddp, int r, int t) { mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward(); },
      [&](Mlp& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); }, 1e-5,
      [&](auto& ddp, Mlp& net, int rank) {
        // Gradients live in the buckets: within a bucket, each follows the previous one.
        std::map<std::string, at::Tensor> grads;
        for (const auto& item : net->named_parameters()) grads[item.key()] = item.value().grad();
        auto layout = ddp.bucket_layout();
        ASSERT_GE(layout.size(), 2u);
        for (const auto& bucket : layout) {
          for (size_t i = 1; i < bucket.size(); ++i) {
            const at::Tensor& prev = grads[bucket[i - 1]];
            EXPECT_EQ(static_cast<float*>(grads[bucket[i]].data_ptr()),
                      static_cast<float*>(prev.data_ptr()) + prev.numel())
                << bucket[i] << " does not follow " << bucket[i - 1] << " on rank " << rank;
          }
        }
        // Another step keeps the same memory: no copy in or out.
        void* before = grads["fc1.weight"].data_ptr();
        mse(ddp(d.shard_x(0, rank)), d.shard_y(0, rank)).backward();
        EXPECT_EQ(net->fc1->weight.grad().data_ptr(), before);
      });
}

TEST_P(DdpEquivalence, Fp16CompressionWithinOnePercent) {
  const int world = GetParam();
  Data d = make_data(world, 1, {8});
  expect_equivalent<Mlp>(
      world, {.comm_hook = fp16_compress_hook()},
      [&](auto& ddp, int r, int t) { mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward(); },
      [&](Mlp& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); }, 1e-2);
}

TEST_P(DdpEquivalence, BucketsRebuiltInArrivalOrderKeepGradientViews) {
  const int world = GetParam();
  Data d = make_data(world, 1, {8});
  DdpOptions options{
      .first_bucket_bytes = 300, .bucket_bytes = 600, .gradient_as_bucket_view = true};
  expect_equivalent<Reordered>(
      world, options,
      [&](auto& ddp, int r, int t) {
        if (t == 0) {  // before any backward: reverse registration order, the body first
          EXPECT_EQ(ddp.bucket_layout().front().front(), "body.bias");
        }
        mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward();
      },
      [&](Reordered& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); }, 1e-5,
      [](auto& ddp, Reordered& net, int rank) {
        EXPECT_EQ(ddp.stats().bucket_rebuilds, 1);
        auto layout = ddp.bucket_layout();
        ASSERT_EQ(layout.size(), 2u);  // head (272 bytes), then body (576 bytes)
        EXPECT_EQ(std::set<std::string>(layout[0].begin(), layout[0].end()),
                  (std::set<std::string>{"head.weight", "head.bias"}));
        // The gradients moved with the buckets: views of the new layout, one after the other.
        auto grad = [&](const std::string& name) { return net->named_parameters()[name].grad(); };
        for (const auto& bucket : layout) {
          at::Tensor first = grad(bucket[0]), second = grad(bucket[1]);
          EXPECT_EQ(static_cast<float*>(second.data_ptr()),
                    static_cast<float*>(first.data_ptr()) + first.numel())
              << "rank " << rank;
        }
      });
}

// [Bucket memory] On shm, DDP's buckets come from ProcessGroup::allocate, also after the rebuild
// (here forced by the arrival order), so their all_reduce takes the zero-copy path, with the
// gradients as views into that memory, and training still equals one process's. shared_buckets
// = false keeps them private, and tcp has no shared memory to give.
TEST(DdpBuckets, SharedMemoryBucketsOnShmTrainLikeOneProcess) {
  Data d = make_data(2, 1, {8});
  auto step = [&](auto& ddp, int r, int t) {
    mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward();
  };
  auto ref = [&](Reordered& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); };
  for (const std::string backend : {"shm", "tcp"}) {
    for (const bool shared : {true, false}) {
      SCOPED_TRACE(backend + (shared ? ", shared buckets" : ", private buckets"));
      const DdpOptions options{.first_bucket_bytes = 300,
                               .bucket_bytes = 600,
                               .gradient_as_bucket_view = true,
                               .shared_buckets = shared};
      const bool expect_shared = shared && backend == "shm";
      expect_equivalent<Reordered>(
          2, options, step, ref, 1e-5,
          [&](auto& ddp, Reordered&, int) {
            EXPECT_EQ(ddp.stats().bucket_rebuilds, 1);
            EXPECT_EQ(ddp.stats().buckets, 2);
            EXPECT_EQ(ddp.stats().shared_buckets, expect_shared ? 2 : 0);
          },
          backend);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, DdpEquivalence, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(DdpCompression, Fp16IsApproximateAndBf16WithinFivePercent) {
  Data d = make_data(2, 1, {8});
  // Exact averaging would match far below 1e-2; fp16 must show its rounding, so the hook ran.
  double worst = 0;
  expect_equivalent<Mlp>(
      2, {.comm_hook = bf16_compress_hook()},
      [&](auto& ddp, int r, int t) { mse(ddp(d.shard_x(t, r)), d.shard_y(t, r)).backward(); },
      [&](Mlp& net, int t) { mse(net(d.x[t]), d.y[t]).backward(); }, 5e-2);
  ::torch::manual_seed(0);
  Mlp reference;
  const auto initial = snapshot(*reference);
  std::vector<at::Tensor> exact, compressed;
  for (bool compress : {false, true}) {
    spawn_groups(2, [&](ProcessGroup& pg) {
      Mlp net;
      load(*net, initial);
      DistributedDataParallel ddp(net, share(pg), {});
      if (compress) ddp.register_comm_hook(fp16_compress_hook());
      auto opt = make_sgd(*net);
      for (int t = 0; t < kSteps; ++t) {
        opt.zero_grad();
        mse(ddp(d.shard_x(t, pg.rank())), d.shard_y(t, pg.rank())).backward();
        opt.step();
      }
      if (pg.rank() == 0) (compress ? compressed : exact) = snapshot(*net);
    });
  }
  for (size_t i = 0; i < exact.size(); ++i)
    worst = std::max(worst, relative_diff(compressed[i], exact[i]));
  EXPECT_GT(worst, 1e-7);
  EXPECT_LT(worst, 1e-2);
}

// One parameter w whose gradient is the input: loss = sum(w * x), so d loss / d w = x exactly.
struct WeightedSumImpl : nn::Module {
  explicit WeightedSumImpl(int64_t n) : w(register_parameter("w", ::torch::zeros({n}))) {}
  at::Tensor forward(const at::Tensor& x) { return (w * x).sum(); }
  at::Tensor w;
};
TORCH_MODULE(WeightedSum);

// The compress hooks average what their 16-bit type holds, not the f32 gradients: on 4 ranks,
// rank r's gradient element i is 4 (y + delta), where y = 1/4 + k * step is exact in the hook's
// type and delta is below half a unit in its last place. Dividing by 4 and rounding gives y, and
// the sums of the ys are exact, so the averaged gradient is the sum of the ys over ranks, bit for
// bit; the exact average (no compression) is that plus 4 delta. The steps are chosen so that the
// other 16-bit type gives yet another result: f16's ys (multiples of 2^-10) are not bf16 values,
// and bf16's y + delta (a multiple of 2^-12) is an f16 value that f16 would not round.
TEST(DdpCompression, HooksAverageTheSixteenBitRoundedGradientsExactly) {
  constexpr int kWorld = 4;
  constexpr int64_t kN = 256;
  struct Case {
    const char* name;
    CommHook hook;
    double step, delta;
    int steps;  // k in [0, steps): y in [1/4, 1/2)
  };
  const Case cases[] = {
      {"fp16", fp16_compress_hook(), std::ldexp(1.0, -10), std::ldexp(1.0, -15), 256},
      {"bf16", bf16_compress_hook(), std::ldexp(1.0, -6), std::ldexp(1.0, -12), 16},
  };
  for (const Case& c : cases) {
    auto y = [&](int r, int64_t i) {
      return 0.25 + static_cast<double>((i * 7 + r * 5) % c.steps) * c.step;
    };
    spawn_groups(kWorld, [&](ProcessGroup& pg) {
      WeightedSum net(kN);
      DistributedDataParallel ddp(net, share(pg), {.comm_hook = c.hook});
      at::Tensor x = ::torch::empty({kN});
      for (int64_t i = 0; i < kN; ++i)
        x[i] = static_cast<float>(kWorld * (y(pg.rank(), i) + c.delta));
      ddp(x).backward();
      const at::Tensor grad = net->w.grad();
      ASSERT_TRUE(grad.defined());
      for (int64_t i = 0; i < kN; ++i) {
        double rounded = 0;
        for (int r = 0; r < kWorld; ++r) rounded += y(r, i);
        const double exact = rounded + kWorld * c.delta;
        ASSERT_EQ(grad[i].item<float>(), static_cast<float>(rounded))
            << c.name << " [" << i << "] rank " << pg.rank() << "; the exact average is " << exact;
        ASSERT_NE(static_cast<float>(exact), static_cast<float>(rounded));
      }
    });
  }
}

TEST(DdpErrors, MismatchedModelNamesTheFirstDifferingParameterWithEachRanksShape) {
  std::vector<std::string> errors(2);
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net(pg.rank() == 1 ? 32 : 16);
    try {
      DistributedDataParallel ddp(net, share(pg));
      ADD_FAILURE() << "rank " << pg.rank() << ": no error";
    } catch (const MismatchError& e) {
      errors[pg.rank()] = e.what();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("the model differs across ranks"), std::string::npos) << e;
    EXPECT_NE(e.find("parameter #0: rank 0: 'fc1.weight' [16, 8] Float; rank 1: 'fc1.weight' [32, "
                     "8] Float"),
              std::string::npos)
        << e;
  }
}

TEST(DdpErrors, AFailureAtTheEndOfBackwardSurfacesFromBackwardAndTheNextIterationWorks) {
  at::set_num_threads(1);
  Data d = make_data(2, 1, {8});
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net;
    int calls = 0;
    CommHook failing_once = [&calls, average = allreduce_hook()](ProcessGroup& g, GradBucket& b) {
      HookWork work = average(g, b);
      if (calls++ == 0) {
        work.finish = [] { throw std::runtime_error("boom in the finish step"); };
      }
      return work;
    };
    DistributedDataParallel ddp(net, share(pg), {.comm_hook = failing_once});
    net->zero_grad();
    try {
      mse(ddp(d.shard_x(0, pg.rank())), d.shard_y(0, pg.rank())).backward();
      ADD_FAILURE() << "backward did not throw";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("boom in the finish step"), std::string::npos)
          << e.what();
    }
    net->zero_grad();
    mse(ddp(d.shard_x(1, pg.rank())), d.shard_y(1, pg.rank())).backward();
    // Averaged again: both ranks hold the same gradient.
    at::Tensor mine = net->fc1->weight.grad().clone();
    at::Tensor all = ::torch::zeros({2, mine.numel()});
    pg.all_gather(BufferView{mine.data_ptr(), static_cast<size_t>(mine.numel()), DType::f32},
                  BufferView{all.data_ptr(), static_cast<size_t>(all.numel()), DType::f32})
        ->wait();
    EXPECT_TRUE(all[0].equal(all[1]));
    EXPECT_EQ(ddp.stats().synced_backwards, 1);
  });
}

TEST(DdpWarnings, UnusedParameterIsNamedOnceByEachRankThatSkippedIt) {
  at::set_num_threads(1);
  Data d = make_data(2, 1, {8});
  ::testing::internal::CaptureStderr();
  spawn_groups(2, [&](ProcessGroup& pg) {
    Branchy net;
    DistributedDataParallel ddp(net, share(pg));
    for (int t = 0; t < 6;
         ++t) {  // rank 1 skips the branch at t = 0, 1, 3, 4; rank 0 at 1, 2, 4, 5
      net->zero_grad();
      mse(ddp(d.shard_x(t, pg.rank()), uses_extra(pg.rank(), t)), d.shard_y(t, pg.rank()))
          .backward();
    }
  });
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(err, "'extra.weight'"), 2u) << err;
  EXPECT_EQ(count_of(err, "'extra.bias'"), 2u) << err;
  EXPECT_EQ(count_of(err, "on rank 0 of group"), 1u) << err;
  EXPECT_EQ(count_of(err, "on rank 1 of group"), 1u) << err;
  EXPECT_EQ(count_of(err, "fc1."), 0u) << err;
  EXPECT_NE(err.find("find_unused_parameters"), std::string::npos) << err;
}

}  // namespace
}  // namespace lockstep::torch
