// The harness of tests/torch/ddp_test.cc: its models, data, and expect_equivalent, which trains a
// model under DDP on several ranks and compares every rank with one process (see [Reference] in
// ddp_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/torch/ddp.h"
#include "support/spawn.h"
#include "torch/module_state.h"

// TORCH_MODULE names torch::nn, which inside lockstep::torch means lockstep::torch::nn.
namespace lockstep::torch {
namespace nn = ::torch::nn;
}  // namespace lockstep::torch

namespace lockstep::torch::ddp_harness {

namespace F = ::torch::nn::functional;
using lockstep::testing::spawn_groups;
using testing::share;

constexpr int kSteps = 20;
constexpr int64_t kBatch = 4;  // samples per rank per micro-batch
constexpr double kLr = 0.05;

struct MlpImpl : nn::Module {
  explicit MlpImpl(int64_t hidden = 16)
      : fc1(register_module("fc1", nn::Linear(8, hidden))),
        fc2(register_module("fc2", nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", nn::Linear(hidden, 4))) {}
  at::Tensor forward(at::Tensor x) { return fc3(::torch::relu(fc2(::torch::relu(fc1(x))))); }
  nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

// conv(1->4, 3) - BatchNorm - relu - maxpool - fc(36->4), on 8x8 images.
struct BnNetImpl : nn::Module {
  BnNetImpl()
      : conv(register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 4, 3)))),
        bn(register_module("bn", nn::BatchNorm2d(4))),
        fc(register_module("fc", nn::Linear(36, 4))) {}
  at::Tensor forward(at::Tensor x) {
    x = ::torch::max_pool2d(::torch::relu(bn(conv(x))), 2);
    return fc(x.flatten(1));
  }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
  nn::Linear fc;
};
TORCH_MODULE(BnNet);

// An MLP with a branch that some ranks skip on some iterations.
struct BranchyImpl : nn::Module {
  BranchyImpl()
      : fc1(register_module("fc1", nn::Linear(8, 16))),
        extra(register_module("extra", nn::Linear(16, 16))),
        fc2(register_module("fc2", nn::Linear(16, 4))) {}
  at::Tensor forward(at::Tensor x, bool use_extra) {
    x = ::torch::relu(fc1(x));
    if (use_extra) x = ::torch::relu(extra(x));
    return fc2(x);
  }
  nn::Linear fc1, extra, fc2;
};
TORCH_MODULE(Branchy);

// Registers the head before the body but runs the body first: gradients arrive head first, not
// in reverse registration order, so the buckets are rebuilt after the first iteration.
struct ReorderedImpl : nn::Module {
  ReorderedImpl()
      : head(register_module("head", nn::Linear(16, 4))),
        body(register_module("body", nn::Linear(8, 16))) {}
  at::Tensor forward(at::Tensor x) { return head(::torch::relu(body(x))); }
  nn::Linear head, body;
};
TORCH_MODULE(Reordered);

// Whether shard r uses the branch at step t: with 2 ranks, no rank uses it when t % 3 == 1.
inline bool uses_extra(int rank, int step) {
  return (rank + step) % 3 == 0;
}

// Inputs and targets of every step: rows [(m * world + r) * kBatch, +kBatch) are rank r's
// micro-batch m.
struct Data {
  int world = 1;
  std::vector<at::Tensor> x, y;
  at::Tensor shard_x(int step, int rank, int micro = 0) const { return rows(x[step], rank, micro); }
  at::Tensor shard_y(int step, int rank, int micro = 0) const { return rows(y[step], rank, micro); }
  at::Tensor rows(const at::Tensor& t, int rank, int micro) const {
    return t.narrow(0, (micro * world + rank) * kBatch, kBatch);
  }
};

inline Data make_data(int world, int micro, std::vector<int64_t> sample_shape) {
  ::torch::manual_seed(1234);
  Data d{.world = world};
  std::vector<int64_t> shape = {world * micro * kBatch};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  for (int t = 0; t < kSteps; ++t) {
    d.x.push_back(::torch::randn(shape));
    d.y.push_back(::torch::randn({world * micro * kBatch, 4}));
  }
  return d;
}

inline std::vector<at::Tensor> snapshot(nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  for (const auto& b : m.buffers()) out.push_back(b.detach().clone());
  return out;
}

inline void load(nn::Module& m, const std::vector<at::Tensor>& state) {
  ::torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& p : m.parameters()) p.copy_(state[i++]);
  for (auto& b : m.buffers()) b.copy_(state[i++]);
}

// max |a - ref| / max |ref|.
inline double relative_diff(const at::Tensor& a, const at::Tensor& ref) {
  double scale = ref.abs().max().item<double>();
  return (a - ref).abs().max().item<double>() / std::max(scale, 1e-30);
}

inline ::torch::optim::SGD make_sgd(nn::Module& m) {
  return ::torch::optim::SGD(m.parameters(), ::torch::optim::SGDOptions(kLr).momentum(0.9));
}

// Trains a reference Net for kSteps with ref_step, then Net under DDP on `world` ranks with
// rank_step, and checks every rank's parameters (and rank 0's floating buffers) against it.
// Rank 0 starts from the reference's initial state; the other ranks from their own random
// initialisation, which DDP's construction must overwrite. `check(ddp, net, rank)` runs after
// training on each rank.
template <class Net, class RankStep, class RefStep>
void expect_equivalent(int world, const DdpOptions& options, RankStep rank_step, RefStep ref_step,
                       double tolerance,
                       std::function<void(DistributedDataParallel<Net>&, Net&, int)> check = {},
                       const std::string& backend = "tcp") {
  at::set_num_threads(1);
  ::torch::manual_seed(0);
  Net reference;
  const std::vector<at::Tensor> initial = snapshot(*reference);
  auto ref_opt = make_sgd(*reference);
  for (int t = 0; t < kSteps; ++t) {
    ref_opt.zero_grad();
    ref_step(reference, t);
    ref_opt.step();
  }
  const std::vector<at::Tensor> expected = snapshot(*reference);
  // The comparison means something only if training moved the parameters well past tolerance.
  ASSERT_GT(relative_diff(initial[0], expected[0]), std::min(100 * tolerance, 0.1));
  const size_t num_params = reference->parameters().size();

  std::vector<double> worst(world, 0.0);
  spawn_groups(
      world,
      [&](ProcessGroup& pg) {
        Net net;
        if (pg.rank() == 0) load(*net, initial);
        DistributedDataParallel ddp(net, share(pg), options);
        auto opt = make_sgd(*net);
        for (int t = 0; t < kSteps; ++t) {
          opt.zero_grad();
          rank_step(ddp, pg.rank(), t);
          opt.step();
        }
        const std::vector<at::Tensor> got = snapshot(*net);
        for (size_t i = 0; i < got.size(); ++i) {
          bool is_param = i < num_params;
          if (!is_param && (pg.rank() != 0 || !got[i].is_floating_point())) continue;
          double diff = relative_diff(got[i], expected[i]);
          worst[pg.rank()] = std::max(worst[pg.rank()], diff);
          EXPECT_LE(diff, tolerance)
              << "rank " << pg.rank() << (is_param ? " parameter #" : " buffer #") << i;
        }
        if (check) check(ddp, net, pg.rank());
      },
      backend);
  std::printf("[ddp equivalence] world %d: largest relative difference %.2g (tolerance %.0g)\n",
              world, *std::max_element(worst.begin(), worst.end()), tolerance);
}

inline at::Tensor mse(const at::Tensor& a, const at::Tensor& b) {
  return F::mse_loss(a, b);
}

}  // namespace lockstep::torch::ddp_harness
