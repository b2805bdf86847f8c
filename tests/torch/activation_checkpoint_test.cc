// checkpoint() alone (the same gradients as the plain block, dropout included), and under DDP:
// a checkpointed tail whose first gradients arrive inside the nested backward; a block applied
// twice in checkpointed regions with static_graph, equal to one process; without static_graph
// the error names the option; a graph that changes under static_graph is an InvalidArgument.
#include "lockstep/torch/activation_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

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

constexpr int kSteps = 5;
constexpr int64_t kBatch = 4;

// fc_in, then `block` applied `uses` times (each use checkpointed when `checkpointed`), then
// fc_out; with tail_only, a single checkpoint covers the block and fc_out.
struct NetImpl : nn::Module {
  NetImpl()
      : fc_in(register_module("fc_in", nn::Linear(8, 16))),
        block(register_module("block", nn::Linear(16, 16))),
        fc_out(register_module("fc_out", nn::Linear(16, 4))) {
    to(::torch::kFloat64);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = ::torch::tanh(fc_in(x));
    auto apply_block = [this](const at::Tensor& v) { return ::torch::tanh(block(v)); };
    const CheckpointOptions plain_rng{.preserve_rng_state = false};  // ranks are threads
    if (tail_only && checkpointed) {
      return checkpoint([this, apply_block](const at::Tensor& v) { return fc_out(apply_block(v)); },
                        h, plain_rng);
    }
    for (int i = 0; i < uses; ++i)
      h = checkpointed ? checkpoint(apply_block, h, plain_rng) : apply_block(h);
    return fc_out(h);
  }
  nn::Linear fc_in, block, fc_out;
  int uses = 2;
  bool checkpointed = true;
  bool tail_only = false;
};
TORCH_MODULE(Net);

TEST(Checkpoint, GradientsEqualThePlainBlocksAndDropoutDrawsTheSameMask) {
  ::torch::manual_seed(3);
  nn::Linear layer(6, 6);
  layer->to(::torch::kFloat64);
  const at::Tensor x0 = ::torch::randn({5, 6}, ::torch::kFloat64);
  auto block = [&](const at::Tensor& v) {
    return ::torch::dropout(::torch::tanh(layer(v)), 0.5, /*train=*/true);
  };
  auto grads = [&](bool checkpointed) {
    layer->zero_grad();
    at::Tensor x = x0.clone().requires_grad_(true);
    ::torch::manual_seed(11);
    at::Tensor out = checkpointed ? checkpoint(block, x) : block(x);
    ::torch::manual_seed(99);  // the recomputation must not see this state
    (out * out).sum().backward();
    return std::vector<at::Tensor>{x.grad().clone(), layer->weight.grad().clone(),
                                   layer->bias.grad().clone()};
  };
  const auto plain = grads(false), checked = grads(true);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(::torch::allclose(plain[i], checked[i], 0, 1e-12)) << "gradient #" << i;
  }
  EXPECT_GT(plain[1].abs().sum().item<double>(), 0);
}

// DDP over `world` ranks, each on its own batch, against one process on the concatenated batch.
void expect_trains_like_one_process(int world, DdpOptions options, int uses, bool tail_only) {
  at::set_num_threads(1);
  ::torch::manual_seed(21);
  std::vector<at::Tensor> x, y;
  for (int t = 0; t < kSteps; ++t) {
    x.push_back(::torch::randn({world * kBatch, 8}, ::torch::kFloat64));
    y.push_back(::torch::randn({world * kBatch, 4}, ::torch::kFloat64));
  }
  Net reference;
  reference->checkpointed = false;
  reference->uses = uses;
  const std::vector<at::Tensor> initial = parameters_of(*reference);
  ::torch::optim::SGD ref_opt(reference->parameters(),
                              ::torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int t = 0; t < kSteps; ++t) {
    ref_opt.zero_grad();
    ::torch::mse_loss(reference(x[t]), y[t]).backward();
    ref_opt.step();
  }
  const std::vector<at::Tensor> expected = parameters_of(*reference);
  spawn_groups(
      world,
      [&](ProcessGroup& pg) {
        Net net;
        net->uses = uses;
        net->tail_only = tail_only;
        load_parameters(*net, initial);
        DistributedDataParallel ddp(net, share(pg), options);
        ::torch::optim::SGD opt(net->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
        for (int t = 0; t < kSteps; ++t) {
          opt.zero_grad();
          at::Tensor mine = x[t].narrow(0, pg.rank() * kBatch, kBatch);
          ::torch::mse_loss(ddp(mine), y[t].narrow(0, pg.rank() * kBatch, kBatch)).backward();
          opt.step();
        }
        const std::vector<at::Tensor> got = parameters_of(*net);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_LE((got[i] - expected[i]).abs().max().item<double>(), 1e-5)
              << "rank " << pg.rank() << " parameter #" << i;
        }
        EXPECT_EQ(ddp.stats().synced_backwards, kSteps);
        // From the second backward on, buckets are sent while backward runs.
        EXPECT_GE(ddp.stats().early_launched, kSteps - 1) << "rank " << pg.rank();
      },
      "shm");
  EXPECT_GT((expected[0] - initial[0]).abs().max().item<double>(), 1e-3);  // training moved it
}

class DdpStaticGraph : public ::testing::TestWithParam<int> {};

TEST_P(DdpStaticGraph, ABlockAppliedTwiceInCheckpointedRegionsTrainsLikeOneProcess) {
  DdpOptions options;
  options.static_graph = true;
  options.first_bucket_bytes = 1024;  // several buckets: some launch during backward
  expect_trains_like_one_process(GetParam(), options, /*uses=*/2, /*tail_only=*/false);
}

TEST_P(DdpStaticGraph, ACheckpointedTailWhoseGradientsArriveInTheNestedBackward) {
  DdpOptions options;
  options.first_bucket_bytes = 1024;
  expect_trains_like_one_process(GetParam(), options, /*uses=*/1, /*tail_only=*/true);
}

INSTANTIATE_TEST_SUITE_P(Worlds, DdpStaticGraph, ::testing::Values(2, 4),
                         [](const auto& info) { return "World" + std::to_string(info.param); });

// Runs one DDP step per entry of uses_per_step on 2 ranks; returns each rank's error, if any.
std::vector<std::string> errors_of(DdpOptions options, std::vector<int> uses_per_step) {
  std::vector<std::string> errors(2);
  spawn_groups(
      2,
      [&](ProcessGroup& pg) {
        ::torch::manual_seed(4);
        Net net;
        DistributedDataParallel ddp(net, share(pg), options);
        try {
          for (int uses : uses_per_step) {
            net->uses = uses;
            ::torch::mse_loss(ddp(::torch::randn({kBatch, 8}, ::torch::kFloat64)),
                              ::torch::zeros({kBatch, 4}, ::torch::kFloat64))
                .backward();
          }
        } catch (const InvalidArgument& e) {
          errors[pg.rank()] = e.what();
        }
      },
      "shm");
  return errors;
}

TEST(DdpStaticGraphErrors, WithoutStaticGraphTheRepeatedGradientErrorNamesTheOption) {
  for (const std::string& e : errors_of({}, {2})) {
    EXPECT_NE(e.find("parameter 'block."), std::string::npos) << e;
    EXPECT_NE(e.find("got a gradient twice"), std::string::npos) << e;
    EXPECT_NE(e.find("pass .static_graph = true"), std::string::npos) << e;
  }
}

TEST(DdpStaticGraphErrors, AGraphThatChangesUnderStaticGraphIsAnInvalidArgument) {
  DdpOptions options;
  options.static_graph = true;
  for (const std::string& e : errors_of(options, {2, 3})) {
    EXPECT_NE(e.find("got its gradient 3 times in this backward pass"), std::string::npos) << e;
    EXPECT_NE(e.find("but 2 times in the first one"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace lockstep::torch
