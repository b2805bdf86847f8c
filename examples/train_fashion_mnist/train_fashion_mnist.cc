// The main job: a small CNN trained on Fashion-MNIST with DistributedDataParallel.
//
//   lockstep run --nproc-per-node 2 -- build/train_fashion_mnist [--epochs 3] [--resume] ...
//
// Every rank reads the dataset, trains on its own shard of each epoch (DistributedDataLoader),
// and DDP averages the gradients, so the replicas stay identical. After each epoch the ranks
// evaluate disjoint halves of the test set together, rank 0 prints the epoch's train loss, test
// accuracy and throughput, and rank 0 writes a checkpoint that --resume continues from.
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

// The learning rate of global step `step` out of `total`: cosine decay from o.lr to 0, or o.lr.
void set_learning_rate(const Options& o, torch::optim::SGD& optimizer, size_t step, size_t total) {
  const double scale =
      o.cosine ? 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / total)) : 1.0;
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::SGDOptions&>(group.options()).lr(o.lr * scale);
  }
}

template <class Loader, class Ddp>
EpochResult train_epoch(const Options& o, Loader& loader, Ddp& ddp, torch::optim::SGD& optimizer,
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
    set_learning_rate(o, optimizer, static_cast<size_t>(epoch) * steps + step++,
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

// Loads the checkpoint when resuming; returns the first epoch to train.
int restore(const Options& o, const std::string& path, lt::CheckpointState& state,
            lockstep::ProcessGroup& group) {
  if (!o.resume) return 0;
  if (!lt::load_checkpoint(group, path, &state)) {
    if (group.rank() == 0)
      std::printf("no checkpoint at %s; starting from scratch\n", path.c_str());
    return 0;
  }
  const int epoch = static_cast<int>(state.counters.at("epoch"));
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
  torch::optim::SGD optimizer(
      net->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov));
  const std::string path =
      (std::filesystem::path(o.checkpoint_dir) / "fashion_mnist.ckpt").string();
  lt::CheckpointState state{.model = net.ptr().get(), .optimizer = &optimizer};
  const int first_epoch = restore(o, path, state, *group);
  if (first_epoch >= o.epochs) {
    if (group->rank() == 0)
      std::printf("all %d epochs are done; pass a larger --epochs\n", o.epochs);
    return 0;
  }
  lt::DistributedDataLoader<TrainSet> loader(
      lt::FashionMnist({.dir = o.data_dir, .subset = o.subset})
          .map(torch::data::transforms::Stack<>()),
      *group,
      {.batch_size = o.batch_size, .sampler = {.seed = o.seed, .first_epoch = first_epoch}});
  if (group->rank() == 0) {
    std::printf(
        "training on %zu samples per rank per epoch, %d rank(s) (%s backend), %zu per batch\n",
        loader.samples_per_epoch(), group->size(), group->backend_name().c_str(), o.batch_size);
    std::fflush(stdout);
    std::filesystem::create_directories(o.checkpoint_dir);
  }
  for (int epoch = first_epoch; epoch < o.epochs; ++epoch) {
    EpochResult r = train_epoch(o, loader, ddp, optimizer, *group, epoch);
    r.test_accuracy = evaluate(net, test, *group);
    state.counters = {{"epoch", epoch}};
    lt::save_checkpoint(*group, path, state);
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
