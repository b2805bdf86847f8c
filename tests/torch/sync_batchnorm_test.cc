// SyncBatchNorm over real ProcessGroups, ranks as threads, in double precision: on W ranks with
// uneven (even empty) batches it equals torch::nn::BatchNorm{1,2,3}d on the concatenated batch
// (each rank's output rows, grad_input rows, running statistics; weight and bias gradients summed
// over the ranks, the convention of the header); subgroups synchronise only among themselves;
// eval mode communicates nothing; bad inputs fail with clear errors. convert_sync_batchnorm
// replaces the BatchNorms of Sequential / ModuleList / ModuleDict / the registry with the same
// tensors, refuses (changing nothing) a BatchNorm held by a typed member, and a converted conv
// net trained under DDP equals one process training the BatchNorm net on the whole batch.
#include "lockstep/torch/sync_batchnorm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/torch/ddp.h"
#include "support/spawn.h"

namespace lockstep::torch {
namespace {

namespace nn = ::torch::nn;
using lockstep::testing::spawn_groups;

constexpr int64_t kC = 3;      // channels
constexpr int kSteps = 3;      // training steps per comparison
constexpr double kTol = 1e-9;  // double precision throughout

std::shared_ptr<ProcessGroup> share(ProcessGroup& pg) {
  return std::shared_ptr<ProcessGroup>(&pg, [](ProcessGroup*) {});
}

// Max |a - b|, after checking the shapes agree.
double diff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e30;
  return a.numel() == 0 ? 0.0 : (a - b).abs().max().item<double>();
}

// Values of x per channel around 2 + channel with spread 3: a mean far from 0 exercises the
// variance's accuracy.
at::Tensor batch(std::vector<int64_t> shape, double offset = 2) {
  at::Tensor x = ::torch::randn(shape, at::kDouble) * 3 + offset;
  std::vector<int64_t> channel(shape.size(), 1);
  channel[1] = shape[1];
  return x + ::torch::arange(shape[1], at::kDouble).view(channel);
}

c10::optional<double> torch_momentum(std::optional<double> m) {
  return m ? c10::optional<double>(*m) : c10::nullopt;
}

struct Case {
  std::vector<int64_t> batches;  // rows on each rank
  std::vector<int64_t> spatial;  // dimensions after C
  std::optional<double> momentum = 0.1;
  bool affine = true;
};

// SyncBatchNorm on batches.size() ranks against BatchNorm (torch::nn::BatchNorm1d/2d/3d) over
// the concatenated batch, kSteps training steps, each with backward of sum(y * G).
template <class BatchNorm>
void expect_like_one_batchnorm(const Case& c) {
  at::set_num_threads(1);
  ::torch::manual_seed(7);
  const int world = static_cast<int>(c.batches.size());
  std::vector<int64_t> offset(c.batches.size() + 1, 0);
  std::partial_sum(c.batches.begin(), c.batches.end(), offset.begin() + 1);
  auto shape = [&](int64_t n) {
    std::vector<int64_t> s{n, kC};
    s.insert(s.end(), c.spatial.begin(), c.spatial.end());
    return s;
  };
  BatchNorm ref(nn::BatchNormOptions(kC).momentum(torch_momentum(c.momentum)).affine(c.affine));
  ref->to(at::kDouble);
  if (c.affine) {
    ::torch::NoGradGuard no_grad;
    ref->weight.uniform_(0.5, 1.5);
    ref->bias.uniform_(-0.5, 0.5);
  }
  const at::Tensor w0 = c.affine ? ref->weight.detach().clone() : at::Tensor();
  const at::Tensor b0 = c.affine ? ref->bias.detach().clone() : at::Tensor();
  std::vector<at::Tensor> xs, gs, ys, gxs, gws, gbs;
  for (int t = 0; t < kSteps; ++t) {
    xs.push_back(batch(shape(offset.back())));
    gs.push_back(::torch::randn(shape(offset.back()), at::kDouble));
    at::Tensor x = xs[t].clone().requires_grad_();
    at::Tensor y = ref(x);
    (y * gs[t]).sum().backward();
    ys.push_back(y.detach());
    gxs.push_back(x.grad());
    if (c.affine) {
      gws.push_back(ref->weight.grad().clone());
      gbs.push_back(ref->bias.grad().clone());
      ref->weight.mutable_grad().zero_();
      ref->bias.mutable_grad().zero_();
    }
  }
  // Each rank's weight and bias gradients, per step: [t][rank].
  std::vector<std::vector<at::Tensor>> gw(kSteps, std::vector<at::Tensor>(world)), gb = gw;

  spawn_groups(world, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    SyncBatchNorm bn(SyncBatchNormOptions(kC, share(pg)).momentum(c.momentum).affine(c.affine));
    bn->to(at::kDouble);
    if (c.affine) {
      ::torch::NoGradGuard no_grad;
      bn->weight.copy_(w0);
      bn->bias.copy_(b0);
    }
    for (int t = 0; t < kSteps; ++t) {
      auto mine = [&](const at::Tensor& global) {
        return global.narrow(0, offset[r], c.batches[r]);
      };
      at::Tensor x = mine(xs[t]).clone().requires_grad_();
      at::Tensor y = bn(x);
      (y * mine(gs[t])).sum().backward();
      EXPECT_LE(diff(y, mine(ys[t])), kTol) << "output, rank " << r << " step " << t;
      if (c.batches[r] > 0) {
        EXPECT_LE(diff(x.grad(), mine(gxs[t])), kTol) << "grad_input, rank " << r << " step " << t;
      }
      if (c.affine) {
        gw[t][r] = bn->weight.grad().clone();
        gb[t][r] = bn->bias.grad().clone();
        bn->weight.mutable_grad().zero_();
        bn->bias.mutable_grad().zero_();
      }
    }
    EXPECT_LE(diff(bn->running_mean, ref->running_mean), kTol) << "rank " << r;
    EXPECT_LE(diff(bn->running_var, ref->running_var), kTol) << "rank " << r;
    EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), kSteps);
  });
  // The weight and bias gradients are each rank's part: their sum is the global batch's.
  for (int t = 0; t < kSteps && c.affine; ++t) {
    EXPECT_LE(diff(at::stack(gw[t]).sum(0), gws[t]), kTol) << "weight grad, step " << t;
    EXPECT_LE(diff(at::stack(gb[t]).sum(0), gbs[t]), kTol) << "bias grad, step " << t;
  }
}

TEST(SyncBatchNorm, TwoRanks2dUnevenBatchesEqualOneBatchNorm) {
  expect_like_one_batchnorm<nn::BatchNorm2d>({.batches = {5, 3}, .spatial = {3, 4}});
}

TEST(SyncBatchNorm, FourRanks1dWithAnEmptyRankAndCumulativeAverageEqualOneBatchNorm) {
  expect_like_one_batchnorm<nn::BatchNorm1d>(
      {.batches = {2, 3, 0, 4}, .spatial = {}, .momentum = std::nullopt});
  expect_like_one_batchnorm<nn::BatchNorm1d>({.batches = {4, 1, 2, 2}, .spatial = {5}});
}

TEST(SyncBatchNorm, TwoRanks3dWithoutAffineEqualOneBatchNorm) {
  expect_like_one_batchnorm<nn::BatchNorm3d>(
      {.batches = {1, 2}, .spatial = {2, 3, 2}, .affine = false});
}

TEST(SyncBatchNorm, GroupOfOneRankEqualsBatchNorm) {
  expect_like_one_batchnorm<nn::BatchNorm2d>({.batches = {6}, .spatial = {2, 2}});
}

TEST(SyncBatchNorm, DisjointSubgroupsSynchroniseOnlyAmongThemselves) {
  at::set_num_threads(1);
  ::torch::manual_seed(3);
  // Ranks 0-1 and 2-3 see data around 0 and around 10: a BatchNorm over both pairs would not match.
  std::vector<at::Tensor> xs;
  for (int r = 0; r < 4; ++r) xs.push_back(batch({3 + r, kC, 2, 2}, r < 2 ? 0.0 : 10.0));
  std::vector<at::Tensor> expected_y(4), expected_mean(2);
  for (int s = 0; s < 2; ++s) {
    nn::BatchNorm2d ref(kC);
    ref->to(at::kDouble);
    at::Tensor y = ref(at::cat({xs[2 * s], xs[2 * s + 1]})).detach();
    expected_y[2 * s] = y.narrow(0, 0, xs[2 * s].size(0));
    expected_y[2 * s + 1] = y.narrow(0, xs[2 * s].size(0), xs[2 * s + 1].size(0));
    expected_mean[static_cast<size_t>(s)] = ref->running_mean.clone();
  }
  spawn_groups(4, [&](ProcessGroup& pg) {
    auto low = pg.new_group({0, 1});
    auto high = pg.new_group({2, 3});
    const int r = pg.rank();
    auto sub = r < 2 ? low : high;
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(r < 2 ? high : low, nullptr);
    SyncBatchNorm bn(SyncBatchNormOptions(kC, sub));
    bn->to(at::kDouble);
    EXPECT_LE(diff(bn(xs[r]).detach(), expected_y[r]), kTol) << "rank " << r;
    EXPECT_LE(diff(bn->running_mean, expected_mean[r / 2]), kTol) << "rank " << r;
  });
}

TEST(SyncBatchNorm, EvalUsesRunningStatsAndCommunicatesNothing) {
  at::set_num_threads(1);
  ::torch::manual_seed(5);
  const at::Tensor train = batch({8, kC, 3});
  const at::Tensor test = batch({2, kC, 3});
  spawn_groups(2, [&](ProcessGroup& pg) {
    // A short deadline: a collective here would fail the test with TimeoutError, not hang it.
    SyncBatchNorm bn(SyncBatchNormOptions(kC, share(pg)).timeout(std::chrono::seconds(2)));
    SyncBatchNorm local(SyncBatchNormOptions(kC, share(pg))
                            .track_running_stats(false)
                            .timeout(std::chrono::seconds(2)));
    bn->to(at::kDouble);
    local->to(at::kDouble);
    bn(train.narrow(0, 4 * pg.rank(), 4));  // collective: both ranks
    if (pg.rank() != 0) return;             // rank 1 leaves; rank 0 evaluates alone
    bn->eval();
    local->eval();
    nn::BatchNorm1d ref(kC);
    ref->to(at::kDouble);
    ref->running_mean.copy_(bn->running_mean);
    ref->running_var.copy_(bn->running_var);
    ref->eval();
    EXPECT_LE(diff(bn(test), ref(test)), kTol);
    EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
    // Without running statistics, eval normalises by this rank's batch (as torch does).
    nn::BatchNorm1d batch_only(nn::BatchNormOptions(kC).track_running_stats(false));
    batch_only->to(at::kDouble);
    batch_only->eval();
    EXPECT_LE(diff(local(test), batch_only(test)), kTol);
  });
}

TEST(SyncBatchNorm, BadInputsFailWithClearErrors) {
  EXPECT_THROW(std::make_shared<SyncBatchNormImpl>(SyncBatchNormOptions(kC, nullptr)),
               InvalidArgument);
  spawn_groups(1, [&](ProcessGroup& pg) {
    SyncBatchNorm bn(kC, share(pg));
    auto message = [&](const at::Tensor& x) -> std::string {
      try {
        bn(x);
      } catch (const InvalidArgument& e) {
        return e.what();
      }
      return "no error";
    };
    EXPECT_NE(message(::torch::randn({kC})).find("at least 2 dimensions"), std::string::npos);
    EXPECT_NE(message(::torch::randn({4, kC + 1, 2})).find("has 4 channels"), std::string::npos);
    EXPECT_NE(message(::torch::randn({1, kC})).find("more than 1 value"), std::string::npos);
    EXPECT_NE(message(::torch::randn({4, kC}, at::kDouble)).find("dtype"), std::string::npos);
  });
}

TEST(SyncBatchNorm, ChannelCountsThatDifferAcrossRanksAreNamed) {
  std::mutex mu;
  std::vector<std::string> messages;
  int mismatches = 0;
  spawn_groups(
      2,
      [&](ProcessGroup& pg) {
        const int64_t c = 3 + pg.rank();
        SyncBatchNorm bn(SyncBatchNormOptions(c, share(pg)).timeout(std::chrono::seconds(10)));
        try {
          bn(::torch::randn({4, c}));
          ADD_FAILURE() << "rank " << pg.rank() << ": no error";
        } catch (const Error& e) {
          std::lock_guard<std::mutex> lock(mu);
          messages.push_back(e.what());
          mismatches += dynamic_cast<const MismatchError*>(&e) != nullptr;
        }
      },
      "tcp", std::chrono::seconds(10));
  // Each rank fails; at least one finds the mismatch itself (the other may first hear of the
  // abort), and every message says which module and what must agree.
  EXPECT_GE(mismatches, 1);
  for (const auto& m : messages) {
    EXPECT_NE(m.find("SyncBatchNorm(num_features="), std::string::npos) << m;
    EXPECT_NE(m.find("same num_features"), std::string::npos) << m;
  }
}

// conv(2->4) - BatchNorm2d - relu - flatten - fc(64->5) - BatchNorm1d, on 4x4 images, in double.
nn::Sequential conv_net() {
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(2, 4, 3).padding(1)), nn::BatchNorm2d(4),
                     nn::ReLU(), nn::Flatten(), nn::Linear(64, 5), nn::BatchNorm1d(5));
  net->to(at::kDouble);
  return net;
}

void copy_state(nn::Module& to, const nn::Module& from) {
  ::torch::NoGradGuard no_grad;
  auto params = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(params[p.key()]);
  auto buffers = from.named_buffers();
  for (auto& b : to.named_buffers()) b.value().copy_(buffers[b.key()]);
}

template <class Impl>
bool contains(const nn::Module& root) {
  for (const auto& m : root.modules()) {
    if (dynamic_cast<const Impl*>(m.get())) return true;
  }
  return false;
}

bool has_batchnorm(const nn::Module& m) {
  return contains<nn::BatchNorm1dImpl>(m) || contains<nn::BatchNorm2dImpl>(m) ||
         contains<nn::BatchNorm3dImpl>(m);
}

TEST(SyncBatchNormConvert, SequentialKeepsTheTensorsAndItsForwardSynchronises) {
  at::set_num_threads(1);
  ::torch::manual_seed(11);
  nn::Sequential ref = conv_net();
  {
    ::torch::NoGradGuard no_grad;
    ref[1]->as<nn::BatchNorm2d>()->running_mean.fill_(0.25);
    ref[5]->as<nn::BatchNorm1d>()->weight.uniform_(0.5, 1.5);
  }
  const at::Tensor x = batch({6, 2, 4, 4});
  nn::Sequential net0 = conv_net();
  copy_state(*net0, *ref);
  const at::Tensor expected = ref->forward(x).detach();
  spawn_groups(2, [&](ProcessGroup& pg) {
    nn::Sequential net = conv_net();
    copy_state(*net, *net0);
    net[5]->as<nn::BatchNorm1d>()->bias.set_requires_grad(false);
    const at::Tensor old_weight = net[5]->as<nn::BatchNorm1d>()->weight;
    auto root = convert_sync_batchnorm(net.ptr(), share(pg));
    EXPECT_EQ(root.get(), net.get());
    EXPECT_FALSE(has_batchnorm(*net));
    auto* bn2 = net[1]->as<SyncBatchNormImpl>();
    auto* bn1 = net[5]->as<SyncBatchNormImpl>();
    ASSERT_TRUE(bn1 && bn2);
    EXPECT_EQ(net->named_children()["5"].get(), bn1);
    EXPECT_TRUE(bn1->weight.is_same(old_weight));
    EXPECT_FALSE(bn1->bias.requires_grad());
    EXPECT_TRUE(bn1->weight.requires_grad());
    EXPECT_LE(diff(bn2->running_mean, ::torch::full({4}, 0.25, at::kDouble)), 0.0);
    EXPECT_EQ(net->named_parameters().size(), net0->named_parameters().size());
    // Forward goes through the SyncBatchNorms: each rank's rows come out as in one whole batch.
    const at::Tensor y = net->forward(x.narrow(0, 3 * pg.rank(), 3));
    EXPECT_LE(diff(y.detach(), expected.narrow(0, 3 * pg.rank(), 3)), kTol);
  });
}

struct BlockImpl : nn::Module {
  BlockImpl() {
    auto shared = nn::BatchNorm2d(4);
    features = register_module("features", nn::Sequential(nn::Conv2d(2, 4, 1), shared));
    heads = register_module("heads", nn::ModuleList(nn::BatchNorm1d(4), nn::Linear(4, 4), shared));
    std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> dict{
        {"a", nn::BatchNorm3d(4).ptr()}};
    norms = register_module("norms", nn::ModuleDict(dict));
    register_module("plain", nn::BatchNorm2d(4));  // in the registry only
  }
  nn::Sequential features;
  nn::ModuleList heads;
  nn::ModuleDict norms;
};

TEST(SyncBatchNormConvert, NestedContainersRegistryAndSharedModules) {
  spawn_groups(1, [&](ProcessGroup& pg) {
    auto block = std::make_shared<BlockImpl>();
    const at::Tensor shared_weight = block->features[1]->as<nn::BatchNorm2d>()->weight;
    const size_t params = block->parameters().size();
    convert_sync_batchnorm(block, share(pg));
    EXPECT_FALSE(has_batchnorm(*block));
    EXPECT_TRUE(block->features[1]->as<SyncBatchNormImpl>());
    EXPECT_TRUE(block->heads[0]->as<SyncBatchNormImpl>());
    EXPECT_TRUE(block->norms["a"]->as<SyncBatchNormImpl>());
    EXPECT_TRUE(block->named_children()["plain"]->as<SyncBatchNormImpl>());
    // One BatchNorm in two places became one SyncBatchNorm in both, with the same tensors.
    EXPECT_EQ(block->features->ptr(1).get(), block->heads->ptr(2).get());
    EXPECT_TRUE(block->features[1]->as<SyncBatchNormImpl>()->weight.is_same(shared_weight));
    EXPECT_EQ(block->parameters().size(), params);
    // A BatchNorm root becomes a new SyncBatchNorm root.
    nn::BatchNorm2d lone(4);
    auto converted = convert_sync_batchnorm(lone.ptr(), share(pg));
    ASSERT_TRUE(converted->as<SyncBatchNormImpl>());
    EXPECT_TRUE(converted->as<SyncBatchNormImpl>()->running_var.is_same(lone->running_var));
  });
}

struct InnerImpl : nn::Module {
  InnerImpl() : bn(register_module("bn", nn::BatchNorm2d(4))) {}
  nn::BatchNorm2d bn;  // a typed member: conversion cannot redirect it
};
TORCH_MODULE(Inner);

TEST(SyncBatchNormConvert, TypedMemberIsRefusedByPathAndNothingIsConverted) {
  spawn_groups(1, [&](ProcessGroup& pg) {
    auto root = std::make_shared<nn::Module>();
    auto body = root->register_module("body", nn::Sequential(nn::BatchNorm2d(4)));
    root->register_module("inner", Inner());
    try {
      convert_sync_batchnorm(root, share(pg));
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'inner.bn'"), std::string::npos) << m;
      EXPECT_NE(m.find("lockstep::torch::SyncBatchNorm directly"), std::string::npos) << m;
      EXPECT_EQ(m.find("body"), std::string::npos) << m;
    }
    EXPECT_TRUE(body->ptr(0)->as<nn::BatchNorm2d>()) << "the convertible one is left alone too";
  });
}

TEST(SyncBatchNormConvert, DdpTrainingEqualsOneProcessOnTheWholeBatch) {
  at::set_num_threads(1);
  ::torch::manual_seed(13);
  constexpr int kTrainSteps = 4;
  constexpr int64_t kPerRank = 3;
  nn::Sequential ref = conv_net();
  nn::Sequential initial = conv_net();
  copy_state(*initial, *ref);
  std::vector<at::Tensor> xs, ys;
  for (int t = 0; t < kTrainSteps; ++t) {
    xs.push_back(batch({2 * kPerRank, 2, 4, 4}));
    ys.push_back(::torch::randn({2 * kPerRank, 5}, at::kDouble));
  }
  ::torch::optim::SGD whole(ref->parameters(), 0.1);
  for (int t = 0; t < kTrainSteps; ++t) {
    whole.zero_grad();
    ::torch::mse_loss(ref->forward(xs[t]), ys[t]).backward();
    whole.step();
  }
  ASSERT_GT(diff(ref->parameters()[0], initial->parameters()[0]), 1e-3);

  spawn_groups(2, [&](ProcessGroup& pg) {
    nn::Sequential net = conv_net();
    copy_state(*net, *initial);
    convert_sync_batchnorm(net.ptr(), share(pg));
    DistributedDataParallel ddp(net, share(pg));
    ::torch::optim::SGD opt(net->parameters(), 0.1);
    for (int t = 0; t < kTrainSteps; ++t) {
      opt.zero_grad();
      auto x = xs[t].narrow(0, kPerRank * pg.rank(), kPerRank);
      auto y = ys[t].narrow(0, kPerRank * pg.rank(), kPerRank);
      ::torch::mse_loss(ddp(x), y).backward();
      opt.step();
    }
    auto expected = ref->named_parameters();
    for (const auto& p : net->named_parameters())
      EXPECT_LE(diff(p.value(), expected[p.key()]), kTol) << p.key() << " rank " << pg.rank();
    auto buffers = ref->named_buffers();
    for (const auto& b : net->named_buffers())
      EXPECT_LE(diff(b.value().to(at::kDouble), buffers[b.key()].to(at::kDouble)), kTol)
          << b.key() << " rank " << pg.rank();
  });
}

}  // namespace
}  // namespace lockstep::torch
