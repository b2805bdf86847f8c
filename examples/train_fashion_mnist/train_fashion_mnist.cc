// The main job: a small CNN trained on Fashion-MNIST with DistributedDataParallel.
//
//   lockstep run --nproc-per-node 2 -- build/train_fashion_mnist [--epochs 3] [--resume] ...
//
// Every rank reads the dataset, trains on its own shard of each epoch (DistributedDataLoader),
// and DDP averages the gradients, so the replicas stay identical. After each epoch the ranks
// evaluate disjoint halves of the test set together, rank 0 prints the epoch's train loss, test
// accuracy and throughput, and rank 0 writes a checkpoint that --resume continues from.
//
// [Resume] --checkpoint-every N also checkpoints every N steps within an epoch: the model, the
// optimizer (momentum), the sampler's place in the epoch, the step, and every rank's loss sums
// so far. A job killed at any moment and restarted with --resume (`lockstep run --max-restarts K
// -- train_fashion_mnist --resume ...`) continues from the last complete checkpoint and ends with
// the weights an uninterrupted run ends with, bit for bit (scripts/chaos.sh checks it): the data
// order, the learning-rate schedule and the optimizer's state are functions of the position, and
// nothing else in the step is random (no dropout; one intra-op thread per rank by default).
//
// --zero 1 shards the optimizer's state (ZeroRedundancyOptimizer), --zero 2 the gradients too;
// their checkpoints are sharded (every rank writes its part). --uneven gives the ranks shares of
// different sizes of each epoch; the ranks that finish first shadow the others under a Join.
#include <ATen/Parallel.h>
#include <malloc.h>
#include <torch/torch.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "lockstep/torch/checkpoint.h"
#include "lockstep/torch/data.h"
#include "lockstep/torch/ddp.h"
#include "lockstep/torch/join.h"
#include "lockstep/torch/sharded_checkpoint.h"
#include "lockstep/torch/zero.h"
#include "options.h"
#include "progress.h"
#include "weights_file.h"

namespace train_fashion_mnist {
namespace {

namespace nn = torch::nn;
namespace lt = lockstep::torch;
using Clock = std::chrono::steady_clock;

// conv(1->32, 3) - relu - maxpool - conv(32->64, 3) - relu - maxpool - fc(1600->128) - relu -
// fc(128->10). 28x28 -> 26 -> 13 -> 11 -> 5: 64 * 5 * 5 = 1600 features.
struct NetImpl : nn::Module {
  NetImpl()
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3)))),
        fc1(register_module("fc1", nn::Linear(64 * 5 * 5, 128))),
        fc2(register_module("fc2", nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    return fc2(torch::relu(fc1(x.flatten(1))));
  }

  nn::Conv2d conv1;
  nn::Conv2d conv2;
  nn::Linear fc1;
  nn::Linear fc2;
};
TORCH_MODULE(Net);

using TrainSet =
    torch::data::datasets::MapDataset<lt::FashionMnist, torch::data::transforms::Stack<>>;

struct EpochResult {
  double train_loss = 0;     // mean over every rank's samples
  double test_accuracy = 0;  // over the whole test set
  double samples_per_s = 0;  // training samples of all ranks per second of the epoch's steps
  double seconds = 0;
};

// Where training stands ([Resume]): the epoch in progress, the steps of it done, and this rank's
// sums of its loss so far.
struct Position {
  int epoch = 0;
  size_t step = 0;
  std::vector<double> sums = {0, 0};  // loss * samples, samples
};

// Sums `values` over the group (f64, in place).
void sum_over_ranks(lockstep::ProcessGroup& group, std::vector<double>& values) {
  group.all_reduce(lockstep::view(values))->wait();
}

// Small enough that its activations (conv1: 256 x 32 x 26 x 26 floats, 22 MB) stay below the
// mmap threshold of [Allocator], so they are reused rather than page-faulted in each batch.
constexpr int64_t kEvalBatch = 256;

// Correct predictions / samples on this rank's contiguous share of the test set, summed over ranks.
double evaluate(Net& net, const lt::FashionMnist& test, lockstep::ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  net->eval();
  const int64_t n = test.images().size(0);
  const int64_t begin = n * group.rank() / group.size();
  const int64_t end = n * (group.rank() + 1) / group.size();
  double correct = 0;
  for (int64_t i = begin; i < end; i += kEvalBatch) {
    const int64_t len = std::min<int64_t>(kEvalBatch, end - i);
    auto logits = net->forward(test.images().narrow(0, i, len));
    correct += logits.argmax(1).eq(test.targets().narrow(0, i, len)).sum().item<double>();
  }
  net->train();
  std::vector<double> totals = {correct, static_cast<double>(end - begin)};
  sum_over_ranks(group, totals);
  return totals[0] / totals[1];
}

// SGD with momentum, whole on every rank (--zero 0) or sharded (--zero 1 and 2).
struct Optimizer {
  std::unique_ptr<torch::optim::SGD> whole;
  std::unique_ptr<lt::ZeroRedundancyOptimizer> sharded;

  Optimizer(const Options& o, Net& net, std::shared_ptr<lockstep::ProcessGroup> group) {
    auto make = [&o](std::vector<torch::Tensor> params) {
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov));
    };
    if (o.zero == 0) {
      whole = make(net->parameters());
    } else {
      sharded = std::make_unique<lt::ZeroRedundancyOptimizer>(net->parameters(), group, make);
    }
  }
  void zero_grad() { whole ? whole->zero_grad() : sharded->zero_grad(); }
  void step() {
    if (whole) {
      whole->step();
    } else {
      sharded->step();
    }
  }
  // The learning rate of global step `step` out of `total`: cosine decay from o.lr to 0, or o.lr.
  void set_learning_rate(const Options& o, size_t step, size_t total) {
    const double scale =
        o.cosine ? 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / total)) : 1.0;
    torch::optim::Optimizer* local = whole.get();
    if (sharded && sharded->has_local_optimizer()) local = &sharded->local_optimizer();
    if (local == nullptr) return;  // this rank owns no parameter
    for (auto& group : local->param_groups()) {
      static_cast<torch::optim::SGDOptions&>(group.options()).lr(o.lr * scale);
    }
  }
};

// Where the checkpoints go: one file (--zero 0), or a folder of every rank's parts.
class Checkpoint {
 public:
  Checkpoint(const Options& o, Net& net, Optimizer& optimizer, lt::DistributedSampler& sampler) {
    if (optimizer.whole) {
      path_ = (std::filesystem::path(o.checkpoint_dir) / "fashion_mnist.ckpt").string();
      whole_ = {.model = net.ptr().get(), .optimizer = optimizer.whole.get(), .sampler = &sampler};
    } else {
      path_ = (std::filesystem::path(o.checkpoint_dir) / "fashion_mnist.sharded").string();
      sharded_ = {
          .model = net.ptr().get(), .optimizer = optimizer.sharded.get(), .sampler = &sampler};
    }
  }
  const std::string& path() const { return path_; }

  // Collective. Saves the model, the optimizer, the sampler and `at`, with every rank's sums;
  // `epoch_done`: at.epoch is finished. `root` writes the file (--zero 0).
  void save(lockstep::ProcessGroup& group, const Position& at, bool epoch_done, int root = 0) {
    std::vector<double> sums(2 * static_cast<size_t>(group.size()));
    group
        .all_gather(lockstep::ConstBufferView(at.sums.data(), 2, lockstep::DType::f64),
                    lockstep::view(sums))
        ->wait();
    auto& c = counters();
    c = {{"epoch", at.epoch},
         {"step", static_cast<int64_t>(at.step)},
         {"epoch_done", epoch_done},
         {"world", group.size()}};
    for (size_t i = 0; i < sums.size(); ++i) {
      c["sums." + std::to_string(i)] = std::bit_cast<int64_t>(sums[i]);
    }
    if (!is_sharded()) return lt::save_checkpoint(group, path_, whole_, {.root = root});
    std::filesystem::create_directories(path_);  // on every rank: the folder must exist
    lt::save_sharded_checkpoint(group, path_, sharded_);
  }

  // Collective. Loads the checkpoint into the model, the optimizer and the sampler, and returns
  // where to go on from; nullopt when there is none.
  std::optional<Position> load(lockstep::ProcessGroup& group, lt::DistributedSampler& sampler) {
    const bool found = is_sharded() ? lt::load_sharded_checkpoint(group, path_, &sharded_)
                                    : lt::load_checkpoint(group, path_, &whole_);
    if (!found) return std::nullopt;
    const auto& c = counters();
    Position at{.epoch = static_cast<int>(c.at("epoch"))};
    if (!c.contains("step") || c.at("epoch_done") != 0) {
      // The epoch was finished (with --max-steps its sampler stopped short of its end).
      SamplerCursor used_up = sampler.cursor();
      used_up.begin = used_up.end;
      sampler.resume(used_up);
      return Position{.epoch = at.epoch + 1};
    }
    at.step = static_cast<size_t>(c.at("step"));
    if (c.at("world") == group.size()) {  // the sums of this rank's samples so far
      for (size_t i = 0; i < 2; ++i) {
        const std::string key = "sums." + std::to_string(2 * group.rank() + static_cast<int>(i));
        at.sums[i] = std::bit_cast<double>(c.at(key));
      }
    }
    return at;
  }

 private:
  using SamplerCursor = lt::SamplerCursor;
  bool is_sharded() const { return whole_.model == nullptr; }
  std::map<std::string, int64_t>& counters() {
    return is_sharded() ? sharded_.counters : whole_.counters;
  }

  std::string path_;
  lt::CheckpointState whole_;
  lt::ShardedCheckpointState sharded_;
};

// Whether to checkpoint after `step` steps of an epoch of `steps` ([Resume]).
bool checkpoint_due(const Options& o, size_t step, size_t steps) {
  return o.checkpoint_every != 0 && step % o.checkpoint_every == 0 && step < steps;
}

// [Uneven] This rank's share of `epoch`: the epoch's shuffled order cut into one contiguous piece
// per rank, rank r's of weight r + 1, so the ranks run out of data at different steps. Every
// rank follows one learning-rate schedule, that of the longest share (the last rank's): the
// replicas must take the same step at the same iteration. The ranks that run out first stop
// stepping their optimizers, so after each epoch's Join every rank takes the optimizer state of
// the rank that trained last (see train()).
std::vector<size_t> uneven_share(const Options& o, size_t n, int world, int rank, int epoch) {
  const std::vector<size_t> order = lt::shard_indices(
      {.dataset_size = n, .rank = 0, .world_size = 1, .seed = o.seed, .epoch = epoch});
  const size_t w = static_cast<size_t>(world);
  const size_t r = static_cast<size_t>(rank);
  const size_t total_weight = w * (w + 1) / 2;
  const size_t begin = n * (r * (r + 1) / 2) / total_weight;
  const size_t end = n * ((r + 1) * (r + 2) / 2) / total_weight;
  return {order.begin() + static_cast<std::ptrdiff_t>(begin),
          order.begin() + static_cast<std::ptrdiff_t>(end)};
}

template <class Ddp>
EpochResult train_uneven_epoch(const Options& o, const lt::FashionMnist& train, Ddp& ddp,
                               Optimizer& optimizer, lockstep::ProcessGroup& group,
                               Checkpoint& checkpoint, Position& at) {
  const size_t n = train.images().size(0);
  const std::vector<size_t> share = uneven_share(o, n, group.size(), group.rank(), at.epoch);
  std::vector<int64_t> indices(share.begin(), share.end());
  auto steps_of = [&](size_t samples) {
    const size_t steps = (samples + o.batch_size - 1) / o.batch_size;
    return o.max_steps ? std::min(o.max_steps, steps) : steps;
  };
  const size_t steps = steps_of(share.size());
  // Checkpoints only while every rank still trains: up to rank 0's steps (its share is smallest).
  const size_t shared_steps = steps_of(uneven_share(o, n, group.size(), 0, at.epoch).size());
  const size_t schedule_steps =
      steps_of(uneven_share(o, n, group.size(), group.size() - 1, at.epoch).size());
  const auto start = Clock::now();
  {
    std::vector<lt::Joinable*> joinables = {&ddp};
    if (optimizer.sharded) joinables.push_back(optimizer.sharded.get());
    lt::Join join(joinables, {.divide_by_initial_world_size = false});
    for (; at.step < steps; ++at.step) {
      const size_t first = at.step * o.batch_size;
      const int64_t len = static_cast<int64_t>(std::min(o.batch_size, share.size() - first));
      const auto rows = torch::from_blob(indices.data() + first, {len}, torch::kInt64);
      optimizer.set_learning_rate(o, static_cast<size_t>(at.epoch) * schedule_steps + at.step,
                                  static_cast<size_t>(o.epochs) * schedule_steps);
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(ddp(train.images().index_select(0, rows)),
                                                       train.targets().index_select(0, rows));
      loss.backward();
      optimizer.step();
      at.sums[0] += loss.template item<double>() * static_cast<double>(len);
      at.sums[1] += static_cast<double>(len);
      if (checkpoint_due(o, at.step + 1, shared_steps)) {
        checkpoint.save(group, {.epoch = at.epoch, .step = at.step + 1, .sums = at.sums}, false);
      }
    }
    join.join();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> sums = at.sums;
  sum_over_ranks(group, sums);
  return {.train_loss = sums[0] / sums[1], .samples_per_s = sums[1] / seconds, .seconds = seconds};
}

template <class Loader, class Ddp>
EpochResult train_epoch(const Options& o, Loader& loader, Ddp& ddp, Optimizer& optimizer,
                        lockstep::ProcessGroup& group, Checkpoint& checkpoint, Position& at) {
  const size_t steps =
      o.max_steps ? std::min(o.max_steps, loader.batches_per_epoch()) : loader.batches_per_epoch();
  Progress progress(
      {.enabled = group.rank() == 0,
       .total_steps = steps - std::min(steps, at.step),
       .samples_per_step = o.batch_size * static_cast<size_t>(group.size()),
       .label = "epoch " + std::to_string(at.epoch + 1) + "/" + std::to_string(o.epochs)});
  const auto start = Clock::now();
  for (auto& batch : loader) {  // after a resume, the rest of the epoch ([Resume])
    if (at.step == steps) break;
    optimizer.set_learning_rate(o, static_cast<size_t>(at.epoch) * steps + at.step++,
                                static_cast<size_t>(o.epochs) * steps);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(ddp(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    const double value = loss.template item<double>();
    at.sums[0] += value * static_cast<double>(batch.data.size(0));
    at.sums[1] += static_cast<double>(batch.data.size(0));
    progress.step(value);
    if (checkpoint_due(o, at.step, steps)) checkpoint.save(group, at, false);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  std::vector<double> sums = at.sums;
  sum_over_ranks(group, sums);
  return {.train_loss = sums[0] / sums[1], .samples_per_s = sums[1] / seconds, .seconds = seconds};
}

// Loads the checkpoint when resuming; returns where to start.
Position restore(const Options& o, Checkpoint& checkpoint, lockstep::ProcessGroup& group,
                 lt::DistributedSampler& sampler) {
  if (!o.resume) return {};
  const std::optional<Position> at = checkpoint.load(group, sampler);
  if (group.rank() == 0) {
    const char* path = checkpoint.path().c_str();
    if (!at) {
      std::printf("no checkpoint at %s; starting from scratch\n", path);
    } else if (at->step == 0) {
      std::printf("resumed from %s after epoch %d/%d\n", path, at->epoch, o.epochs);
    } else {
      std::printf("resumed from %s at step %zu of epoch %d/%d\n", path, at->step, at->epoch + 1,
                  o.epochs);
    }
    std::fflush(stdout);
  }
  return at.value_or(Position{});
}

// [Allocator] Every step frees and reallocates multi-megabyte activation and gradient tensors.
// With glibc's defaults the freed memory at the top of the heap goes back to the OS at once (trim
// threshold), so each step page-faults it in again, zeroed by the kernel: on 2 cores that made
// training 3x slower (mostly system time), until an evaluation pass happened to raise glibc's
// dynamic thresholds. Keeping up to 512 MiB of freed memory avoids it.
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void report(const Options& o, int epoch, const EpochResult& r) {
  std::printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s (%.1f s)\n",
              epoch + 1, o.epochs, r.train_loss, 100 * r.test_accuracy, r.samples_per_s, r.seconds);
  std::fflush(stdout);
}

// The job's group: from the launcher's environment, or a group of one when started on its own.
std::shared_ptr<lockstep::ProcessGroup> join(const Options& o) {
  const bool launched = std::getenv("WORLD_SIZE") || std::getenv("SLURM_NTASKS") ||
                        std::getenv("OMPI_COMM_WORLD_SIZE");
  if (launched) return lockstep::init_process_group({.backend = o.backend});
  std::printf(
      "not started by a launcher (no WORLD_SIZE): training alone; for 2 ranks run\n"
      "  lockstep run --nproc-per-node 2 -- train_fashion_mnist\n");
  return lockstep::init_process_group({.backend = o.backend,
                                       .rank = 0,
                                       .world_size = 1,
                                       .store = std::make_shared<lockstep::HashStore>()});
}

int train(const Options& o) {
  keep_freed_memory();
  at::set_num_threads(o.threads);
  torch::manual_seed(o.seed);
  auto group = join(o);
  lt::FashionMnist test({.dir = o.data_dir, .split = lt::Split::test});
  Net net;
  lt::DistributedDataParallel ddp(net, group);
  Optimizer optimizer(o, net, group);
  if (o.zero == 2) ddp.shard_gradients(*optimizer.sharded);
  const lt::FashionMnist train_set({.dir = o.data_dir, .subset = o.subset});
  lt::DistributedDataLoader<TrainSet> loader(
      lt::FashionMnist(train_set).map(torch::data::transforms::Stack<>()), *group,
      {.batch_size = o.batch_size, .sampler = {.seed = o.seed}});
  Checkpoint checkpoint(o, net, optimizer, loader.sampler());
  Position at = restore(o, checkpoint, *group, loader.sampler());
  if (at.epoch >= o.epochs) {
    if (group->rank() == 0)
      std::printf("all %d epochs are done; pass a larger --epochs\n", o.epochs);
    return 0;
  }
  if (group->rank() == 0) {
    if (o.uneven) {
      std::printf("training on uneven shares of %lld samples per epoch (rank r: weight r + 1), ",
                  static_cast<long long>(train_set.images().size(0)));
    } else {
      std::printf("training on %zu samples per rank per epoch, ", loader.samples_per_epoch());
    }
    std::printf("%d rank(s) (%s backend), %zu per batch, %s\n", group->size(),
                group->backend_name().c_str(), o.batch_size,
                o.zero == 0   ? "whole optimizer"
                : o.zero == 1 ? "ZeRO-1"
                              : "ZeRO-2");
    std::fflush(stdout);
    std::filesystem::create_directories(o.checkpoint_dir);
  }
  for (; at.epoch < o.epochs; at = Position{.epoch = at.epoch + 1}) {
    EpochResult r = o.uneven
                        ? train_uneven_epoch(o, train_set, ddp, optimizer, *group, checkpoint, at)
                        : train_epoch(o, loader, ddp, optimizer, *group, checkpoint, at);
    r.test_accuracy = evaluate(net, test, *group);
    if (o.uneven && optimizer.whole) {
      // [Uneven] The last rank's optimizer state, which kept stepping, goes to every rank.
      checkpoint.save(*group, at, /*epoch_done=*/true, /*root=*/group->size() - 1);
      checkpoint.load(*group, loader.sampler());
    } else {
      checkpoint.save(*group, at, /*epoch_done=*/true);
    }
    if (group->rank() == 0) report(o, at.epoch, r);
  }
  if (!o.save_weights.empty() && group->rank() == 0) write_weights(*net, o.save_weights);
  return 0;
}

}  // namespace
}  // namespace train_fashion_mnist

int main(int argc, char** argv) {
  using namespace train_fashion_mnist;
  try {
    const Options options = parse_options(argc, argv);
    if (options.help) {
      std::printf("%s", usage_text().c_str());
      return 0;
    }
    return train(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: error: %s\n", e.what());
    return 1;
  }
}
