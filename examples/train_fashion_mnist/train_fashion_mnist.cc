// The main job: a small CNN trained on Fashion-MNIST with DistributedDataParallel.
//
//   lockstep run --nproc-per-node 2 -- build/train_fashion_mnist [--epochs 3] [--resume] ...
//
// Every rank reads the dataset, trains on its own shard of each epoch (DistributedDataLoader),
// and DDP averages the gradients, so the replicas stay identical. After each epoch the ranks
// evaluate disjoint halves of the test set together, rank 0 prints the epoch's train loss, test
// accuracy and throughput, and rank 0 writes a checkpoint that --resume continues from.
//
// --zero 1 shards the optimizer's state (ZeroRedundancyOptimizer), --zero 2 the gradients too;
// their checkpoints are sharded (every rank writes its part). --uneven gives the ranks shares of
// different sizes of each epoch; the ranks that finish first shadow the others under a Join.
#include <ATen/Parallel.h>
#include <malloc.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

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

// [Uneven] This rank's share of `epoch`: the epoch's shuffled order cut into one contiguous piece
// per rank, rank r's of weight r + 1, so the ranks run out of data at different steps.
std::vector<size_t> uneven_share(const Options& o, size_t n, lockstep::ProcessGroup& group,
                                 int epoch) {
  const std::vector<size_t> order = lt::shard_indices(
      {.dataset_size = n, .rank = 0, .world_size = 1, .seed = o.seed, .epoch = epoch});
  const size_t w = static_cast<size_t>(group.size());
  const size_t r = static_cast<size_t>(group.rank());
  const size_t total_weight = w * (w + 1) / 2;
  const size_t begin = n * (r * (r + 1) / 2) / total_weight;
  const size_t end = n * ((r + 1) * (r + 2) / 2) / total_weight;
  return {order.begin() + static_cast<std::ptrdiff_t>(begin),
          order.begin() + static_cast<std::ptrdiff_t>(end)};
}

template <class Ddp>
EpochResult train_uneven_epoch(const Options& o, const lt::FashionMnist& train, Ddp& ddp,
                               Optimizer& optimizer, lockstep::ProcessGroup& group, int epoch) {
  const std::vector<size_t> share = uneven_share(o, train.images().size(0), group, epoch);
  std::vector<int64_t> indices(share.begin(), share.end());
  const size_t steps = (share.size() + o.batch_size - 1) / o.batch_size;
  std::vector<double> sums = {0, 0};  // loss * samples, samples
  const auto start = Clock::now();
  {
    std::vector<lt::Joinable*> joinables = {&ddp};
    if (optimizer.sharded) joinables.push_back(optimizer.sharded.get());
    lt::Join join(joinables, {.divide_by_initial_world_size = false});
    for (size_t step = 0; step < steps && (!o.max_steps || step < o.max_steps); ++step) {
      const size_t first = step * o.batch_size;
      const int64_t len = static_cast<int64_t>(std::min(o.batch_size, share.size() - first));
      const auto rows = torch::from_blob(indices.data() + first, {len}, torch::kInt64);
      optimizer.set_learning_rate(o, static_cast<size_t>(epoch) * steps + step,
                                  static_cast<size_t>(o.epochs) * steps);
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(ddp(train.images().index_select(0, rows)),
                                                       train.targets().index_select(0, rows));
      loss.backward();
      optimizer.step();
      sums[0] += loss.template item<double>() * static_cast<double>(len);
      sums[1] += static_cast<double>(len);
    }
    join.join();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  sum_over_ranks(group, sums);
  return {.train_loss = sums[0] / sums[1], .samples_per_s = sums[1] / seconds, .seconds = seconds};
}

template <class Loader, class Ddp>
EpochResult train_epoch(const Options& o, Loader& loader, Ddp& ddp, Optimizer& optimizer,
                        lockstep::ProcessGroup& group, int epoch) {
  const size_t steps =
      o.max_steps ? std::min(o.max_steps, loader.batches_per_epoch()) : loader.batches_per_epoch();
  Progress progress(
      {.enabled = group.rank() == 0,
       .total_steps = steps,
       .samples_per_step = o.batch_size * static_cast<size_t>(group.size()),
       .label = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(o.epochs)});
  std::vector<double> sums = {0, 0};  // loss * samples, samples
  const auto start = Clock::now();
  size_t step = 0;
  for (auto& batch : loader) {
    if (step == steps) break;
    optimizer.set_learning_rate(o, static_cast<size_t>(epoch) * steps + step++,
                                static_cast<size_t>(o.epochs) * steps);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(ddp(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    const double value = loss.template item<double>();
    sums[0] += value * static_cast<double>(batch.data.size(0));
    sums[1] += static_cast<double>(batch.data.size(0));
    progress.step(value);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  sum_over_ranks(group, sums);
  return {.train_loss = sums[0] / sums[1], .samples_per_s = sums[1] / seconds, .seconds = seconds};
}

// Where the checkpoints go: one file (--zero 0), or a folder of every rank's parts.
struct Checkpoint {
  std::string path;
  lt::CheckpointState whole;
  lt::ShardedCheckpointState sharded;

  Checkpoint(const Options& o, Net& net, Optimizer& optimizer) {
    if (optimizer.whole) {
      path = (std::filesystem::path(o.checkpoint_dir) / "fashion_mnist.ckpt").string();
      whole = {.model = net.ptr().get(), .optimizer = optimizer.whole.get()};
    } else {
      path = (std::filesystem::path(o.checkpoint_dir) / "fashion_mnist.sharded").string();
      sharded = {.model = net.ptr().get(), .optimizer = optimizer.sharded.get()};
    }
  }
  bool is_sharded() const { return whole.model == nullptr; }
  std::map<std::string, int64_t>& counters() {
    return is_sharded() ? sharded.counters : whole.counters;
  }
  bool load(lockstep::ProcessGroup& group) {
    return is_sharded() ? lt::load_sharded_checkpoint(group, path, &sharded)
                        : lt::load_checkpoint(group, path, &whole);
  }
  void save(lockstep::ProcessGroup& group) {
    if (!is_sharded()) return lt::save_checkpoint(group, path, whole);
    std::filesystem::create_directories(path);  // on every rank: the folder must exist
    lt::save_sharded_checkpoint(group, path, sharded);
  }
};

// Loads the checkpoint when resuming; returns the first epoch to train.
int restore(const Options& o, Checkpoint& checkpoint, lockstep::ProcessGroup& group) {
  const std::string& path = checkpoint.path;
  if (!o.resume) return 0;
  if (!checkpoint.load(group)) {
    if (group.rank() == 0)
      std::printf("no checkpoint at %s; starting from scratch\n", path.c_str());
    return 0;
  }
  const int epoch = static_cast<int>(checkpoint.counters().at("epoch"));
  if (group.rank() == 0) {
    std::printf("resumed from %s after epoch %d/%d\n", path.c_str(), epoch + 1, o.epochs);
  }
  return epoch + 1;
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
  Checkpoint checkpoint(o, net, optimizer);
  const int first_epoch = restore(o, checkpoint, *group);
  if (first_epoch >= o.epochs) {
    if (group->rank() == 0)
      std::printf("all %d epochs are done; pass a larger --epochs\n", o.epochs);
    return 0;
  }
  const lt::FashionMnist train_set({.dir = o.data_dir, .subset = o.subset});
  lt::DistributedDataLoader<TrainSet> loader(
      lt::FashionMnist(train_set).map(torch::data::transforms::Stack<>()), *group,
      {.batch_size = o.batch_size, .sampler = {.seed = o.seed, .first_epoch = first_epoch}});
  if (group->rank() == 0) {
    if (o.uneven) {
      std::printf("training on uneven shares of %lld samples per epoch (rank r: weight r + 1), ",
                  static_cast<long long>(train_set.images().size(0)));
    } else {
      std::printf("training on %zu samples per rank per epoch, ", loader.samples_per_epoch());
    }
    std::printf("%d rank(s) (%s backend), %zu per batch, %s\n", group->size(),
                group->backend_name().c_str(), o.batch_size,
                o.zero == 0 ? "whole optimizer" : o.zero == 1 ? "ZeRO-1" : "ZeRO-2");
    std::fflush(stdout);
    std::filesystem::create_directories(o.checkpoint_dir);
  }
  for (int epoch = first_epoch; epoch < o.epochs; ++epoch) {
    EpochResult r = o.uneven ? train_uneven_epoch(o, train_set, ddp, optimizer, *group, epoch)
                             : train_epoch(o, loader, ddp, optimizer, *group, epoch);
    r.test_accuracy = evaluate(net, test, *group);
    checkpoint.counters() = {{"epoch", epoch}};
    checkpoint.save(*group);
    if (group->rank() == 0) report(o, epoch, r);
  }
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
