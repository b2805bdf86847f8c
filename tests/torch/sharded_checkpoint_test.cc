// Sharded checkpoints over real ProcessGroups, ranks as threads: ZeRO training saved at one world
// size and resumed at another continues like one process that never stopped (parameters, and each
// rank's optimizer state for the parameters it owns); the sampler resumed at another world size
// finishes the epoch with exactly the samples not yet visited, then draws the usual next epoch; a
// process killed mid-save (SIGKILL at several points) or a rank failing its write leaves the
// previous checkpoint in force; a checkpoint that does not fit is refused, naming the parameter.
#include "lockstep/torch/sharded_checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/torch/ddp.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "support/temp_dir.h"
#include "torch/module_state.h"

namespace lockstep::torch {
namespace {

using testing::load_parameters;
using testing::parameters_of;
using testing::share;

namespace fs = std::filesystem;
namespace nn = ::torch::nn;
using lockstep::testing::message_of;
using lockstep::testing::spawn_groups;
using lockstep::testing::TempDir;
using Factory = ZeroRedundancyOptimizer::OptimizerFactory;

constexpr int64_t kGlobalBatch = 8;  // samples per step over all ranks (1, 2, 4 or 8 ranks)

struct MlpImpl : nn::Module {
  explicit MlpImpl(int64_t hidden = 16)
      : fc1(register_module("fc1", nn::Linear(8, 32))),
        fc2(register_module("fc2", nn::Linear(32, hidden))),
        fc3(register_module("fc3", nn::Linear(hidden, 4))) {}
  at::Tensor forward(at::Tensor x) { return fc3(::torch::relu(fc2(::torch::relu(fc1(x))))); }
  nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

// Values no run produces, so that a load must overwrite them (ranks as threads share LibTorch's
// generator, so each rank's fresh model is different anyway).
void scramble(nn::Module& m, int seed) {
  ::torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.fill_(100 + seed);
}

Factory sgd() {
  return [](std::vector<at::Tensor> shard) {
    return std::make_unique<::torch::optim::SGD>(shard,
                                                 ::torch::optim::SGDOptions(0.05).momentum(0.9));
  };
}

Factory adam() {
  return [](std::vector<at::Tensor> shard) {
    return std::make_unique<::torch::optim::Adam>(shard, ::torch::optim::AdamOptions(0.01));
  };
}

// Whether `key` is p's key in Optimizer::state(): its TensorImpl's address, as text in LibTorch
// 1.x, the pointer itself in 2.x.
template <class Key>
bool is_key_of(const Key& key, const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;
    address << static_cast<const void*>(p.unsafeGetTensorImpl());
    return key == address.str();
  } else {
    return key == static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

// One parameter's optimizer state as tensors: SGD's momentum buffer; Adam's step and moments.
// Empty when the optimizer has none for it.
std::vector<at::Tensor> state_of(::torch::optim::Optimizer& optimizer, const at::Tensor& p) {
  for (auto& item : optimizer.state()) {
    if (!is_key_of(item.first, p)) continue;
    if (auto* s = dynamic_cast<::torch::optim::SGDParamState*>(item.second.get()))
      return {s->momentum_buffer().clone()};
    if (auto* a = dynamic_cast<::torch::optim::AdamParamState*>(item.second.get()))
      return {::torch::tensor(static_cast<double>(a->step())), a->exp_avg().clone(),
              a->exp_avg_sq().clone()};
  }
  return {};
}

double max_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return 1e30;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

template <class Optimizer>
void step(const std::function<at::Tensor(at::Tensor)>& forward, Optimizer& optimizer,
          const at::Tensor& x, const at::Tensor& y) {
  optimizer.zero_grad();
  ::torch::mse_loss(forward(x), y).backward();
  optimizer.step();
}

// Trains k steps with ZeRO at save_world ranks, saves, loads at load_world ranks, trains j more:
// the parameters equal one process's uninterrupted k + j steps on the same global batches, and
// after the load, each rank's state for each parameter it owns is what the saving run had.
void expect_resharded_like_uninterrupted(int save_world, int load_world, const Factory& make) {
  constexpr int k = 4, j = 3;
  at::set_num_threads(1);
  ::torch::manual_seed(0);
  Mlp reference;
  const std::vector<at::Tensor> initial = parameters_of(*reference);
  std::vector<at::Tensor> xs, ys;
  for (int t = 0; t < k + j; ++t) {
    xs.push_back(::torch::randn({kGlobalBatch, 8}));
    ys.push_back(::torch::randn({kGlobalBatch, 4}));
  }
  auto whole = make(reference->parameters());
  auto forward = [&](at::Tensor x) { return reference(x); };
  for (int t = 0; t < k + j; ++t) step(forward, *whole, xs[t], ys[t]);
  const std::vector<at::Tensor> expected = parameters_of(*reference);
  std::vector<std::vector<at::Tensor>> expected_state;
  for (const auto& p : reference->parameters()) {
    expected_state.push_back(state_of(*whole, p));
    ASSERT_FALSE(expected_state.back().empty()) << "the reference holds state for every parameter";
  }

  TempDir dir;
  std::vector<std::vector<at::Tensor>> saved_state(initial.size());  // by global index
  spawn_groups(save_world, [&](ProcessGroup& pg) {
    Mlp net;
    load_parameters(*net, initial);
    DistributedDataParallel ddp(net, share(pg));
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), make);
    const int64_t per = kGlobalBatch / pg.size();
    auto forward = [&](at::Tensor x) { return ddp(x); };
    for (int t = 0; t < k; ++t) {
      step(forward, opt, xs[t].narrow(0, per * pg.rank(), per),
           ys[t].narrow(0, per * pg.rank(), per));
    }
    for (size_t i : opt.shard(pg.rank()))
      saved_state[i] = state_of(opt.local_optimizer(), net->parameters()[i]);
    save_sharded_checkpoint(
        pg, dir.path(), {.model = net.ptr().get(), .optimizer = &opt, .counters = {{"step", k}}});
  });
  spawn_groups(load_world, [&](ProcessGroup& pg) {
    Mlp net;
    scramble(*net, pg.rank());
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), make);
    ShardedCheckpointState state{.model = net.ptr().get(), .optimizer = &opt};
    ASSERT_TRUE(load_sharded_checkpoint(pg, dir.path(), &state));
    EXPECT_EQ(state.counters, (std::map<std::string, int64_t>{{"step", k}}));
    const auto params = net->parameters();
    if (opt.has_local_optimizer()) {
      EXPECT_EQ(opt.local_optimizer().state().size(), opt.shard(pg.rank()).size())
          << "rank " << pg.rank() << " holds the state of its own parameters only";
      for (size_t i : opt.shard(pg.rank())) {
        const auto got = state_of(opt.local_optimizer(), params[i]);
        ASSERT_EQ(got.size(), saved_state[i].size()) << "parameter #" << i;
        for (size_t t = 0; t < got.size(); ++t)
          EXPECT_TRUE(got[t].equal(saved_state[i][t])) << "parameter #" << i << " state " << t;
      }
    }
    DistributedDataParallel ddp(net, share(pg));
    const int64_t per = kGlobalBatch / pg.size();
    auto forward = [&](at::Tensor x) { return ddp(x); };
    for (int t = k; t < k + j; ++t) {
      step(forward, opt, xs[t].narrow(0, per * pg.rank(), per),
           ys[t].narrow(0, per * pg.rank(), per));
    }
    const std::vector<at::Tensor> got = parameters_of(*net);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LE((got[i] - expected[i]).abs().max().item<double>(), 1e-5)
          << "rank " << pg.rank() << " parameter #" << i;
    }
    for (size_t i : opt.shard(pg.rank())) {
      EXPECT_LE(max_difference(state_of(opt.local_optimizer(), params[i]), expected_state[i]), 1e-5)
          << "rank " << pg.rank() << ": the state of parameter #" << i;
    }
  });
}

TEST(ShardedCheckpointReshard, AdamFrom4To2Ranks) {
  expect_resharded_like_uninterrupted(4, 2, adam());
}
TEST(ShardedCheckpointReshard, AdamFrom2To4Ranks) {
  expect_resharded_like_uninterrupted(2, 4, adam());
}
TEST(ShardedCheckpointReshard, SgdMomentumFrom4To2Ranks) {
  expect_resharded_like_uninterrupted(4, 2, sgd());
}
TEST(ShardedCheckpointReshard, SgdMomentumFrom2To4Ranks) {
  expect_resharded_like_uninterrupted(2, 4, sgd());
}
TEST(ShardedCheckpointReshard, SameWorldSize) {
  expect_resharded_like_uninterrupted(2, 2, adam());
  expect_resharded_like_uninterrupted(4, 4, sgd());
}
// 6 parameters over 8 ranks: two ranks own nothing, save no optimizer state and load none.
TEST(ShardedCheckpointReshard, MoreRanksThanParametersAndOneRank) {
  expect_resharded_like_uninterrupted(8, 1, adam());
  expect_resharded_like_uninterrupted(1, 8, sgd());
}

// ---------------------------------------------------------------------------------------------
// The sampler

constexpr size_t kSamples = 23;

// Runs `world` ranks, each with a sampler resumed from `dir` (or fresh), taking `batches` batches
// of `batch` samples; returns each rank's samples and saves to `dir` afterwards.
std::vector<std::vector<size_t>> take(const std::string& dir, int world, int batches, size_t batch,
                                      bool drop_last, std::vector<std::vector<size_t>>* next) {
  std::vector<std::vector<size_t>> taken(static_cast<size_t>(world));
  spawn_groups(world, [&](ProcessGroup& pg) {
    nn::Linear model(2, 2);
    DistributedSampler sampler(kSamples, pg, {.seed = 7, .drop_last = drop_last, .first_epoch = 3});
    ShardedCheckpointState state{.model = model.ptr().get(), .sampler = &sampler};
    const bool resumed = load_sharded_checkpoint(pg, dir, &state);
    sampler.reset();
    EXPECT_EQ(sampler.epoch(), 3) << (resumed ? "the resumed epoch" : "the first epoch");
    auto& mine = taken[static_cast<size_t>(pg.rank())];
    for (int b = 0; b < batches; ++b) {
      auto got = sampler.next(batch);
      if (!got) break;
      mine.insert(mine.end(), got->begin(), got->end());
    }
    save_sharded_checkpoint(pg, dir, state);
    if (next == nullptr) return;
    while (sampler.next(batch)) {
    }
    sampler.reset();  // epoch 4, whole, as an uninterrupted run at this world size deals it
    EXPECT_EQ(sampler.epoch(), 4);
    (*next)[static_cast<size_t>(pg.rank())] = *sampler.next(1000);
  });
  return taken;
}

std::multiset<size_t> all_of(const std::vector<std::vector<size_t>>& parts) {
  std::multiset<size_t> out;
  for (const auto& p : parts) out.insert(p.begin(), p.end());
  return out;
}

TEST(ShardedCheckpointSampler, ResumedAtOtherWorldSizesCoversTheEpochOnce) {
  TempDir dir;
  // World 4: 2 batches of 2 each = the first 16 of the epoch's order (6 each in a whole epoch).
  const auto first = take(dir.path(), 4, 2, 2, false, nullptr);
  // World 3: the 7 left, padded to 9; one batch of 2 each takes 6 of them.
  const auto second = take(dir.path(), 3, 1, 2, false, nullptr);
  // World 2: the last one, padded to 2; then epoch 4 as world 2 deals it.
  std::vector<std::vector<size_t>> next(2);
  const auto third = take(dir.path(), 2, 5, 2, false, &next);
  for (const auto& part : second) EXPECT_EQ(part.size(), 2u);
  for (const auto& part : third) EXPECT_EQ(part.size(), 1u) << "ceil(1 / 2) samples each";
  std::multiset<size_t> seen = all_of(first);
  EXPECT_EQ(seen.size(), 16u);
  for (const auto& part : {second, third}) {
    const auto more = all_of(part);
    for (size_t i : std::set<size_t>(more.begin(), more.end()))
      EXPECT_EQ(seen.count(i), 0u) << "sample " << i << " visited before the resume";
    seen.insert(more.begin(), more.end());
  }
  // 16 + 6 + 2: every sample once, and the one padding slot of the last pass repeats its sample.
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), kSamples);
  EXPECT_EQ(seen.size(), kSamples + 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(next[static_cast<size_t>(r)],
              shard_indices(
                  {.dataset_size = kSamples, .rank = r, .world_size = 2, .seed = 7, .epoch = 4}))
        << "rank " << r << ": the epoch after the resumed one is the usual one";
  }
}

TEST(ShardedCheckpointSampler, DropLastKeepsTheCutAndAUsedUpEpochGoesOn) {
  TempDir dir;
  // World 4 with drop_last: 5 each, 20 of the 23; 2 batches of 1 take the first 8.
  const auto first = take(dir.path(), 4, 2, 1, true, nullptr);
  // World 3: the 12 left of the 20, 4 each, all taken.
  const auto second = take(dir.path(), 3, 10, 4, true, nullptr);
  for (const auto& part : second) EXPECT_EQ(part.size(), 4u);
  std::multiset<size_t> seen = all_of(first);
  const auto more = all_of(second);
  seen.insert(more.begin(), more.end());
  std::multiset<size_t> whole;  // what the uninterrupted epoch at world 4 visits
  for (int r = 0; r < 4; ++r) {
    const auto part = shard_indices({.dataset_size = kSamples,
                                     .rank = r,
                                     .world_size = 4,
                                     .seed = 7,
                                     .epoch = 3,
                                     .drop_last = true});
    whole.insert(part.begin(), part.end());
  }
  EXPECT_EQ(seen, whole);
  // The epoch was used up at the save: the resumed sampler starts epoch 4 at once.
  spawn_groups(2, [&](ProcessGroup& pg) {
    nn::Linear model(2, 2);
    DistributedSampler sampler(kSamples, pg, {.seed = 7, .drop_last = true, .first_epoch = 0});
    ShardedCheckpointState state{.model = model.ptr().get(), .sampler = &sampler};
    ASSERT_TRUE(load_sharded_checkpoint(pg, dir.path(), &state));
    EXPECT_EQ(sampler.epoch(), 3);
    sampler.reset();
    EXPECT_EQ(sampler.epoch(), 4);
    EXPECT_EQ(*sampler.next(1000), shard_indices({.dataset_size = kSamples,
                                                  .rank = pg.rank(),
                                                  .world_size = 2,
                                                  .seed = 7,
                                                  .epoch = 4,
                                                  .drop_last = true}));
  });
}

// ---------------------------------------------------------------------------------------------
// Atomicity

// Saves generation `step` at world 2: an Mlp of parameters that depend on `step`, after one SGD
// step with gradients of ones (so every parameter's momentum is ones). Returns the parameters.
std::vector<at::Tensor> train_and_save(const std::string& dir, int64_t step,
                                       const ShardedCheckpointOptions& options = {}) {
  std::vector<at::Tensor> saved;
  std::mutex mu;
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net;
    {
      ::torch::NoGradGuard no_grad;
      for (auto& p : net->parameters()) p.fill_(0.01 * static_cast<double>(step));
    }
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), sgd());
    for (auto& p : net->parameters()) p.mutable_grad() = ::torch::ones_like(p);
    opt.step();  // momentum buffers of ones: every generation holds state
    save_sharded_checkpoint(
        pg, dir, {.model = net.ptr().get(), .optimizer = &opt, .counters = {{"step", step}}},
        options);
    std::lock_guard<std::mutex> lock(mu);
    if (pg.rank() == 0) saved = parameters_of(*net);
  });
  return saved;
}

// Loads `dir` at world 3; expects generation `step`'s model and every parameter's momentum.
void expect_generation(const std::string& dir, int64_t step, const std::vector<at::Tensor>& want) {
  spawn_groups(3, [&](ProcessGroup& pg) {
    Mlp net;
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), sgd());
    ShardedCheckpointState state{.model = net.ptr().get(), .optimizer = &opt};
    ASSERT_TRUE(load_sharded_checkpoint(pg, dir, &state));
    EXPECT_EQ(state.counters.at("step"), step);
    EXPECT_EQ(max_difference(parameters_of(*net), want), 0.0);
    for (size_t i : opt.shard(pg.rank())) {
      const auto momentum = state_of(opt.local_optimizer(), net->parameters()[i]);
      ASSERT_EQ(momentum.size(), 1u);
      EXPECT_TRUE(momentum[0].equal(::torch::ones_like(net->parameters()[i])));
    }
  });
}

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out.insert(fs::relative(e.path(), dir).string());
  return out;
}

// A child process saves generation 2 and is killed by SIGKILL while writing `file` (rank 1's
// shard, rank 0's model, or the index: the commit). Generation 1 must load, whole, at another
// world size; the next save removes what the dead one left.
TEST(ShardedCheckpointAtomicity, SaveKilledMidwayLeavesThePreviousGeneration) {
  at::set_num_threads(1);
  for (const std::string file : {"gen-2/shard-1", "gen-2/model", "index"}) {
    SCOPED_TRACE("killed while writing " + file);
    TempDir dir;
    const auto first = train_and_save(dir.path(), 1);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        train_and_save(dir.path(), 2, {.after_chunk = [&](const std::string& name, size_t) {
                         if (name == file) ::raise(SIGKILL);
                       }});
      } catch (...) {
      }
      ::_exit(3);  // not reached when the kill lands
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    const std::string partial = file + ".tmp." + std::to_string(child);
    EXPECT_TRUE(entries(dir.path()).count(partial)) << "killed while writing " << partial;
    expect_generation(dir.path(), 1, first);
    const auto third = train_and_save(dir.path(), 3);
    expect_generation(dir.path(), 3, third);
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"index", "gen-3", "gen-3/model",
                                                          "gen-3/shard-0", "gen-3/shard-1"}))
        << "the dead save's leftovers and generation 1 are gone";
  }
}

TEST(ShardedCheckpointAtomicity, ARankFailingToWriteFailsTheSaveOnEveryRank) {
  TempDir dir;
  const auto first = train_and_save(dir.path(), 1);
  std::mutex mu;
  std::vector<std::string> messages;
  spawn_groups(3, [&](ProcessGroup& pg) {
    Mlp net;
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), sgd());
    ShardedCheckpointOptions options;
    if (pg.rank() == 2) {
      options.after_chunk = [](const std::string&, size_t) {
        throw ConfigError("no space left on device (injected)");
      };
    }
    const std::string text = message_of<ConfigError>([&] {
      save_sharded_checkpoint(pg, dir.path(), {.model = net.ptr().get(), .optimizer = &opt},
                              options);
    });
    std::lock_guard<std::mutex> lock(mu);
    messages.push_back(text);
  });
  ASSERT_EQ(messages.size(), 3u);
  for (const auto& text : messages) {
    EXPECT_CONTAINS(text, "generation 2: rank 2 failed: no space left on device (injected)");
    EXPECT_CONTAINS(text, "the previous checkpoint stays in force");
  }
  expect_generation(dir.path(), 1, first);
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(ShardedCheckpointErrors, NoCheckpointMisfitsDamageAndDifferentFolders) {
  TempDir dir;
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net;
    ShardedCheckpointState state{.model = net.ptr().get()};
    EXPECT_FALSE(load_sharded_checkpoint(pg, dir.path(), &state)) << "none yet: a fresh start";
  });
  train_and_save(dir.path(), 1);
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp wider(24);  // fc2 and fc3 of other shapes
    ZeroRedundancyOptimizer opt(wider->parameters(), share(pg), sgd());
    ShardedCheckpointState state{.model = wider.ptr().get(), .optimizer = &opt};
    EXPECT_CONTAINS(
        message_of<InvalidArgument>([&] { load_sharded_checkpoint(pg, dir.path(), &state); }),
        "does not fit: parameter fc2.bias is [16] Float in the checkpoint but [24] "
        "Float in the model");
    Mlp net;
    std::vector<at::Tensor> reordered = net->parameters();
    std::swap(reordered[0], reordered[2]);  // fc1.weight where fc2.weight was
    ZeroRedundancyOptimizer other(reordered, share(pg), sgd());
    ShardedCheckpointState mixed{.model = net.ptr().get(), .optimizer = &other};
    EXPECT_CONTAINS(
        message_of<InvalidArgument>([&] { load_sharded_checkpoint(pg, dir.path(), &mixed); }),
        "optimizer parameter #0 (fc2.weight) is [32, 8] Float in the checkpoint but "
        "[16, 32] Float here");
    DistributedSampler sampler(10, pg);
    ShardedCheckpointState with_sampler{.model = net.ptr().get(), .sampler = &sampler};
    EXPECT_CONTAINS(message_of<InvalidArgument>(
                        [&] { load_sharded_checkpoint(pg, dir.path(), &with_sampler); }),
                    "holds no sampler cursor");
    // Rank 1 looks elsewhere: the ranks see different checkpoints.
    TempDir empty;
    ShardedCheckpointState plain{.model = net.ptr().get()};
    EXPECT_CONTAINS(message_of<MismatchError>([&] {
                      load_sharded_checkpoint(pg, pg.rank() == 0 ? dir.path() : empty.path(),
                                              &plain);
                    }),
                    "rank 1: no checkpoint");
  });
  const std::string shard = dir.file("gen-1/shard-1");
  lockstep::testing::write_file(shard, "damaged");
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net;
    ZeroRedundancyOptimizer opt(net->parameters(), share(pg), sgd());
    ShardedCheckpointState state{.model = net.ptr().get(), .optimizer = &opt};
    EXPECT_CONTAINS(
        message_of<ConfigError>([&] { load_sharded_checkpoint(pg, dir.path(), &state); }),
        shard + " is 7 bytes");
    fs::remove(shard);
    pg.barrier()->wait();
    EXPECT_CONTAINS(
        message_of<ConfigError>([&] { load_sharded_checkpoint(pg, dir.path(), &state); }),
        shard + " does not exist");
  });
  spawn_groups(2, [&](ProcessGroup& pg) {
    Mlp net;
    EXPECT_CONTAINS(message_of<ConfigError>([&] {
                      save_sharded_checkpoint(pg, dir.file("missing"), {.model = net.ptr().get()});
                    }),
                    dir.file("missing") + " does not exist or is not a folder");
  });
}

}  // namespace
}  // namespace lockstep::torch
