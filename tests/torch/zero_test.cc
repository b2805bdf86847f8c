// ZeroRedundancyOptimizer over real ProcessGroups, ranks as threads: the partition balances by
// size the same way on every rank; training under DDP with the optimizer state sharded equals one
// process training with the whole optimizer (SGD with momentum, Adam); each rank keeps the state
// of its own shard only; consolidate_state_dict gathers every shard's state on one rank, where it
// loads back into an optimizer over that shard.
#include "lockstep/torch/zero.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/torch/ddp.h"
#include "support/spawn.h"
#include "torch/module_state.h"

namespace lockstep::torch {
namespace {

using testing::load_parameters;
using testing::parameters_of;
using testing::share;

namespace nn = ::torch::nn;
using lockstep::testing::spawn_groups;

constexpr int kSteps = 12;
constexpr int64_t kBatch = 4;  // samples per rank

struct MlpImpl : nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", nn::Linear(8, 32))),
        fc2(register_module("fc2", nn::Linear(32, 16))),
        fc3(register_module("fc3", nn::Linear(16, 4))) {}
  at::Tensor forward(at::Tensor x) { return fc3(::torch::relu(fc2(::torch::relu(fc1(x))))); }
  nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

ZeroRedundancyOptimizer::OptimizerFactory sgd() {
  return [](std::vector<at::Tensor> shard) {
    return std::make_unique<::torch::optim::SGD>(shard,
                                                 ::torch::optim::SGDOptions(0.05).momentum(0.9));
  };
}

ZeroRedundancyOptimizer::OptimizerFactory adam() {
  return [](std::vector<at::Tensor> shard) {
    return std::make_unique<::torch::optim::Adam>(shard, ::torch::optim::AdamOptions(0.01));
  };
}

TEST(ZeroPartition, BalancesBySizeLargestFirstAndAgreesOnEveryRank) {
  // Sizes 100, 10, 50, 50, 5: 100 -> r0; 50 -> r1; 50 -> r1 (50 < 100); 10 -> r0 (tie at 100:
  // the lower rank); 5 -> r1 (100 < 110).
  std::vector<int64_t> sizes = {100, 10, 50, 50, 5};
  spawn_groups(2, [&](ProcessGroup& pg) {
    std::vector<at::Tensor> params;
    for (int64_t n : sizes) params.push_back(::torch::zeros({n}).requires_grad_());
    ZeroRedundancyOptimizer opt(params, share(pg), sgd());
    EXPECT_EQ(opt.shard(0), (std::vector<size_t>{0, 1}));
    EXPECT_EQ(opt.shard(1), (std::vector<size_t>{2, 3, 4}));
    EXPECT_EQ(opt.owner(1), 0);
    EXPECT_EQ(opt.owner(4), 1);
    EXPECT_EQ(opt.local_optimizer().param_groups()[0].params().size(), opt.shard(pg.rank()).size());
    EXPECT_THROW(opt.owner(5), InvalidArgument);
  });
}

// Trains Mlp on `world` ranks under DDP with the optimizer sharded (stage 2: the gradients too),
// and one process with the whole optimizer on the global batch; parameters must agree at the end.
void expect_like_one_process(int world, const ZeroRedundancyOptimizer::OptimizerFactory& make,
                             double tolerance, int stage = 1) {
  at::set_num_threads(1);
  ::torch::manual_seed(0);
  Mlp reference;
  const std::vector<at::Tensor> initial = parameters_of(*reference);
  std::vector<at::Tensor> xs, ys;
  for (int t = 0; t < kSteps; ++t) {
    xs.push_back(::torch::randn({kBatch * world, 8}));
    ys.push_back(::torch::randn({kBatch * world, 4}));
  }
  auto whole = make(reference->parameters());
  for (int t = 0; t < kSteps; ++t) {
    whole->zero_grad();
    ::torch::mse_loss(reference(xs[t]), ys[t]).backward();
    whole->step();
  }
  const std::vector<at::Tensor> expected = parameters_of(*reference);
  ASSERT_GT((expected[0] - initial[0]).abs().max().item<double>(), 100 * tolerance);

  spawn_groups(world, [&](ProcessGroup& pg) {
    Mlp net;
    load_parameters(*net, initial);
    DistributedDataParallel ddp(net, share(pg));
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), make);
    if (stage == 2) ddp.shard_gradients(opt);
    const auto params = net->parameters();
    for (int t = 0; t < kSteps; ++t) {
      opt.zero_grad();
      auto x = xs[t].narrow(0, kBatch * pg.rank(), kBatch);
      auto y = ys[t].narrow(0, kBatch * pg.rank(), kBatch);
      ::torch::mse_loss(ddp(x), y).backward();
      for (size_t i = 0; i < params.size(); ++i) {  // stage 2: a rank keeps its own gradients only
        const bool owned = opt.owner(i) == pg.rank();
        EXPECT_EQ(params[i].grad().defined(), owned || stage == 1)
            << "rank " << pg.rank() << " step " << t << " parameter #" << i;
      }
      opt.step();
    }
    const std::vector<at::Tensor> got = parameters_of(*net);
    for (size_t i = 0; i < got.size(); ++i) {
      const double diff = (got[i] - expected[i]).abs().max().item<double>();
      EXPECT_LE(diff, tolerance) << "rank " << pg.rank() << " parameter #" << i;
    }
    // The local optimizer holds state for its own shard only.
    auto& local = opt.local_optimizer();
    EXPECT_EQ(local.param_groups()[0].params().size(), opt.shard(pg.rank()).size());
    EXPECT_LE(local.state().size(), opt.shard(pg.rank()).size());
    EXPECT_LT(opt.shard(pg.rank()).size(), got.size()) << "each rank owns only part";
  });
}

TEST(ZeroRedundancyOptimizer, SgdWithMomentumTrainsLikeOneProcess) {
  expect_like_one_process(2, sgd(), 1e-5);
}

TEST(ZeroRedundancyOptimizer, AdamOnThreeRanksTrainsLikeOneProcess) {
  expect_like_one_process(3, adam(), 1e-5);
}

// ZeRO-1 and ZeRO-2, SGD with momentum and Adam, at 2 and 4 ranks.
class ZeroStages : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(ZeroStages, TrainsLikeOneProcess) {
  auto [stage, world, use_adam] = GetParam();
  expect_like_one_process(world, use_adam ? adam() : sgd(), 1e-5, stage);
}

INSTANTIATE_TEST_SUITE_P(StageWorldOptimizer, ZeroStages,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values(2, 4),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return "Zero" + std::to_string(std::get<0>(info.param)) + "_World" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_Adam" : "_SgdMomentum");
                         });

TEST(ZeroRedundancyOptimizer, ShardedGradientsRefuseACommunicationHook) {
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net;
    DistributedDataParallel ddp(net, share(pg));
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), sgd());
    ddp.shard_gradients(opt);
    EXPECT_THROW(ddp.register_comm_hook(fp16_compress_hook()), InvalidArgument);
    Mlp other;
    ZeroRedundancyOptimizer foreign(other->parameters(), share(pg), sgd());
    EXPECT_THROW(ddp.shard_gradients(foreign), InvalidArgument);
  });
}

TEST(ZeroRedundancyOptimizer, ConsolidatedStateLoadsBackIntoAnOptimizerOverEachShard) {
  spawn_groups(2, [&](ProcessGroup& pg) {
    ::torch::manual_seed(0);
    Mlp net;
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), adam());
    for (int t = 0; t < 3; ++t) {
      opt.zero_grad();
      ::torch::mse_loss(net(::torch::randn({kBatch, 8})), ::torch::randn({kBatch, 4})).backward();
      opt.step();
    }
    opt.consolidate_state_dict(0);
    if (pg.rank() != 0) {
      EXPECT_TRUE(opt.consolidated_state().empty());
      return;
    }
    ASSERT_EQ(opt.consolidated_state().size(), 2u);
    const auto params = net->parameters();
    for (int r = 0; r < 2; ++r) {
      const std::string& bytes = opt.consolidated_state()[static_cast<size_t>(r)];
      ASSERT_FALSE(bytes.empty()) << "rank " << r;
      std::vector<at::Tensor> shard;
      for (size_t i : opt.shard(r)) shard.push_back(params[i]);
      ::torch::optim::Adam loaded(shard, ::torch::optim::AdamOptions(0.01));
      ::torch::serialize::InputArchive in;
      std::istringstream stream(bytes);
      in.load_from(stream);
      loaded.load(in);
      EXPECT_EQ(loaded.state().size(), shard.size()) << "rank " << r << ": Adam state per param";
    }
  });
}

}  // namespace
}  // namespace lockstep::torch
