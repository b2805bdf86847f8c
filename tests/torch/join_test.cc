// Join over real process groups, ranks as threads: ranks with fewer batches shadow the others'
// DDP (and ZeRO) collectives, and training equals one process that, at each step, trains on the
// concatenated batches of the ranks still training, divided by the group size or by their number.
// Also: buffers come from a rank still training; every replica ends equal; throw_on_early_
// termination stops every rank at the same iteration; a rank that neither trains nor joins is
// named at the deadline.
#include "lockstep/torch/join.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/torch/ddp.h"
#include "lockstep/torch/zero.h"
#include "support/spawn.h"
#include "torch/module_state.h"

namespace lockstep::torch {
namespace {

using testing::load_parameters;
using testing::parameters_of;
using testing::share;

namespace nn = ::torch::nn;
using lockstep::testing::spawn_groups;

constexpr int64_t kBatch = 4;
constexpr double kLr = 0.05;

// An MLP with a buffer that counts the forwards of this replica: under broadcast_buffers it
// shows whose buffers each iteration started from.
struct CountingMlpImpl : nn::Module {
  CountingMlpImpl()
      : fc1(register_module("fc1", nn::Linear(8, 16))),
        fc2(register_module("fc2", nn::Linear(16, 4))),
        forwards(register_buffer("forwards", ::torch::zeros({1}, ::torch::kFloat64))) {}
  at::Tensor forward(const at::Tensor& x) {
    {
      ::torch::NoGradGuard no_grad;
      forwards.add_(1);
    }
    return fc2(::torch::tanh(fc1(x)));
  }
  nn::Linear fc1, fc2;
  at::Tensor forwards;
};
TORCH_MODULE(CountingMlp);

CountingMlp make_net(const std::vector<at::Tensor>& initial) {
  CountingMlp net;
  net->to(::torch::kFloat64);
  if (!initial.empty()) load_parameters(*net, initial);
  return net;
}

enum class Opt { sgd, adam };

std::unique_ptr<::torch::optim::Optimizer> make_optimizer(Opt kind, std::vector<at::Tensor> p) {
  if (kind == Opt::sgd)
    return std::make_unique<::torch::optim::SGD>(p, ::torch::optim::SGDOptions(kLr).momentum(0.9));
  return std::make_unique<::torch::optim::Adam>(p, ::torch::optim::AdamOptions(0.01));
}

// counts[r] batches for rank r: x[r][t], y[r][t].
struct Batches {
  std::vector<int> counts;
  std::vector<std::vector<at::Tensor>> x, y;
  int steps() const { return *std::max_element(counts.begin(), counts.end()); }
};

Batches make_batches(std::vector<int> counts) {
  ::torch::manual_seed(77);
  Batches b{.counts = counts};
  for (int n : counts) {
    b.x.emplace_back();
    b.y.emplace_back();
    for (int t = 0; t < n; ++t) {
      b.x.back().push_back(::torch::randn({kBatch, 8}, ::torch::kFloat64));
      b.y.back().push_back(::torch::randn({kBatch, 4}, ::torch::kFloat64));
    }
  }
  return b;
}

// One process: at step t, the mean-squared errors of the ranks with a batch t, summed and divided
// by the group size (or by their number).
std::vector<at::Tensor> reference(const Batches& b, const std::vector<at::Tensor>& initial,
                                  Opt kind, bool divide_by_world) {
  CountingMlp net = make_net(initial);
  auto opt = make_optimizer(kind, net->parameters());
  const int world = static_cast<int>(b.counts.size());
  for (int t = 0; t < b.steps(); ++t) {
    opt->zero_grad();
    at::Tensor loss = ::torch::zeros({}, ::torch::kFloat64);
    int training = 0;
    for (int r = 0; r < world; ++r) {
      if (t >= b.counts[r]) continue;
      loss = loss + ::torch::mse_loss(net(b.x[r][t]), b.y[r][t]);
      training += 1;
    }
    (loss / (divide_by_world ? world : training)).backward();
    opt->step();
  }
  return parameters_of(*net);
}

struct Case {
  std::vector<int> counts;
  bool divide_by_world = true;
  bool zero = false;  // ZeroRedundancyOptimizer instead of a replicated optimizer
  Opt opt = Opt::sgd;
  bool shard_gradients = false;  // ZeRO-2
};

// Trains with DDP under a Join on counts.size() ranks and checks every rank's final parameters
// and forward-counting buffer.
void expect_join_equivalent(const Case& c) {
  at::set_num_threads(1);
  const Batches b = make_batches(c.counts);
  ::torch::manual_seed(5);
  const std::vector<at::Tensor> initial = parameters_of(*make_net({}));
  const std::vector<at::Tensor> expected = reference(b, initial, c.opt, c.divide_by_world);
  ASSERT_GT((expected[0] - initial[0]).abs().max().item<double>(), 1e-3);  // training moved it
  const int world = static_cast<int>(c.counts.size());
  spawn_groups(
      world,
      [&](ProcessGroup& pg) {
        const int rank = pg.rank();
        CountingMlp net = make_net(rank == 0 ? initial : std::vector<at::Tensor>{});
        DistributedDataParallel ddp(net, share(pg));
        std::unique_ptr<::torch::optim::Optimizer> plain;
        std::unique_ptr<ZeroRedundancyOptimizer> zero;
        if (c.zero) {
          zero = std::make_unique<ZeroRedundancyOptimizer>(
              net->parameters(), share(pg),
              [&](std::vector<at::Tensor> shard) { return make_optimizer(c.opt, shard); });
        } else {
          plain = make_optimizer(c.opt, net->parameters());
        }
        if (c.shard_gradients) ddp.shard_gradients(*zero);
        std::vector<Joinable*> joinables{&ddp};
        if (zero) joinables.push_back(zero.get());
        {
          Join join(joinables, {.divide_by_initial_world_size = c.divide_by_world});
          for (int t = 0; t < b.counts[rank]; ++t) {
            zero ? zero->zero_grad() : plain->zero_grad();
            ::torch::mse_loss(ddp(b.x[rank][t]), b.y[rank][t]).backward();
            if (zero) {
              zero->step();
            } else {
              plain->step();
            }
          }
          join.join();
        }
        EXPECT_EQ(ddp.stats().joined_iterations, b.steps() - b.counts[rank]) << "rank " << rank;
        const std::vector<at::Tensor> got = parameters_of(*net);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_LE((got[i] - expected[i]).abs().max().item<double>(), 1e-5)
              << "rank " << rank << " parameter #" << i;
        }
        // Each iteration starts from the buffers of the lowest rank still training, and the
        // end copies those of the last rank to join: every replica counts every iteration.
        EXPECT_EQ(net->forwards.item<double>(), b.steps()) << "rank " << rank;
      },
      "shm");
}

class JoinEquivalence : public ::testing::TestWithParam<std::tuple<std::vector<int>, bool>> {};

TEST_P(JoinEquivalence, DdpWithSgdMomentum) {
  auto [counts, divide] = GetParam();
  expect_join_equivalent({.counts = counts, .divide_by_world = divide});
}

// World 2 with one rank short (one of them with no batch at all); world 4 with 1, 2 and 3 ranks
// short (one of them, rank 0, with no batch: it shadows from the first iteration, the bucket
// rebuild included).
INSTANTIATE_TEST_SUITE_P(
    Counts, JoinEquivalence,
    ::testing::Combine(::testing::Values(std::vector<int>{2, 5}, std::vector<int>{0, 3},
                                         std::vector<int>{5, 5, 5, 2}, std::vector<int>{5, 1, 3, 5},
                                         std::vector<int>{0, 2, 4, 5}),
                       ::testing::Bool()),
    [](const auto& info) {
      std::string name = "Ranks";
      for (int n : std::get<0>(info.param)) name += "_" + std::to_string(n);
      return name + (std::get<1>(info.param) ? "_DivideByWorld" : "_DivideByTraining");
    });

TEST(JoinZero, ZeroOneWithAdamShadowsTheStepAndUpdatesTheJoinedRanksShard) {
  expect_join_equivalent({.counts = {3, 1, 4, 2}, .zero = true, .opt = Opt::adam});
  expect_join_equivalent(
      {.counts = {2, 4}, .divide_by_world = false, .zero = true, .opt = Opt::sgd});
}

TEST(JoinZero, ZeroTwoShadowsTheReduceScatterOfTheGradients) {
  expect_join_equivalent(
      {.counts = {0, 3, 1, 4}, .zero = true, .opt = Opt::adam, .shard_gradients = true});
}

TEST(JoinErrors, ThrowOnEarlyTerminationStopsEveryRankAtTheSameIteration) {
  const Batches b = make_batches({2, 4, 4});
  std::vector<std::string> errors(3);
  std::vector<int> stopped_at(3, -1);
  spawn_groups(
      3,
      [&](ProcessGroup& pg) {
        const int rank = pg.rank();
        CountingMlp net = make_net({});
        DistributedDataParallel ddp(net, share(pg));
        ::torch::optim::SGD opt(net->parameters(), kLr);
        int t = 0;
        try {
          Join join({&ddp}, {.throw_on_early_termination = true});
          for (; t < b.counts[rank]; ++t) {
            opt.zero_grad();
            ::torch::mse_loss(ddp(b.x[rank][t]), b.y[rank][t]).backward();
            opt.step();
          }
          join.join();
        } catch (const Error& e) {
          errors[rank] = e.what();
          stopped_at[rank] = t;
        }
      },
      "shm");
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[r].find("rank 0 of group"), std::string::npos) << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("ran out of inputs while 2 ranks still train"), std::string::npos)
        << errors[r];
  }
  EXPECT_EQ(stopped_at, (std::vector<int>{2, 2, 2}));  // in rank 1 and 2's third forward
}

TEST(JoinErrors, ARankThatNeitherTrainsNorJoinsIsNamedAtTheDeadline) {
  const Batches b = make_batches({1, 3, 1});
  constexpr auto kTimeout = std::chrono::milliseconds(1500);
  std::vector<std::string> errors(3);
  std::vector<double> seconds(3, 0);
  spawn_groups(
      3,
      [&](ProcessGroup& pg) {
        const int rank = pg.rank();
        CountingMlp net = make_net({});
        DistributedDataParallel ddp(net, share(pg), {.timeout = kTimeout});
        ::torch::optim::SGD opt(net->parameters(), kLr);
        Join join({&ddp}, {.timeout = kTimeout});
        auto start = std::chrono::steady_clock::now();
        try {
          for (int t = 0; t < b.counts[rank]; ++t) {
            opt.zero_grad();
            ::torch::mse_loss(ddp(b.x[rank][t]), b.y[rank][t]).backward();
            opt.step();
            start = std::chrono::steady_clock::now();
          }
          // Rank 2 stalls (a dataloader stuck, a debugger) past the deadline.
          if (rank == 2) std::this_thread::sleep_for(3 * kTimeout);
          join.join();
        } catch (const Error& e) {
          errors[rank] = e.what();
          seconds[rank] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      },
      "shm", kTimeout);
  for (int r : {0, 1}) {
    EXPECT_NE(errors[r].find("rank 2"), std::string::npos) << r << ": " << errors[r];
    EXPECT_LT(seconds[r], 3 * kTimeout.count() / 1000.0) << errors[r];
  }
}

TEST(JoinErrors, JoinablesOverDifferentGroupsAreAnInvalidArgument) {
  spawn_groups(2, [&](ProcessGroup& pg) {
    CountingMlp a = make_net({}), b = make_net({});
    DistributedDataParallel ddp_a(a, share(pg));
    auto other = pg.new_group({0, 1});
    DistributedDataParallel ddp_b(b, other);
    EXPECT_THROW(Join({&ddp_a, &ddp_b}), InvalidArgument);
    Join disabled({&ddp_a}, {.enable = false});
    disabled.join();  // returns at once, no collective
  });
}

}  // namespace
}  // namespace lockstep::torch
