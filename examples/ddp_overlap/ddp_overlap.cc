// Overlap benchmark for DistributedDataParallel: a communication-heavy MLP, 784-4096-4096-10
// (about 20M parameters, 80 MB of f32 gradients), batch 64 per rank, one intra-op thread per rank.
//
// Each iteration measures, on every rank, one after the other (so that load changes on a busy
// machine hit all three alike), and rank 0 prints the medians:
//   backward      backward of the bare module (no communication)
//   allreduce     all_reduce(avg) of the 80 MB in DDP's buckets, alone
//   ddp backward  backward through DDP: bucket allreduces run while backward goes on, and
//                 backward returns once every bucket is averaged
//   exposed       the part of "ddp backward" spent at its end waiting for communication
// Overlap: the share of the allreduce hidden behind backward, 1 - exposed / allreduce. (The
// difference ddp backward - backward says the same, but carries the noise of two backward
// timings.)
//
//   ddp_overlap [--world 2] [--iters 10] [--warmup 2] [--backend auto] [--shared-buckets 1]
//                                                                       ranks as threads
//   lockstep run --nproc-per-node 2 ddp_overlap                         ranks as processes
//
// --scaling 1 instead times whole training steps (forward, backward, SGD step) of the main job's
// CNN on synthetic 28x28 batches of 64 per rank, and prints samples/s over all ranks: run it with
// --world 1 and --world 2 to get the scaling factor without data loading in the way.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "lockstep/torch/ddp.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int world = 2;
  int iters = 10;
  int warmup = 2;
  std::string backend = "auto";
  int scaling = 0;
  bool shared_buckets = true;  // DdpOptions::shared_buckets
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--world")
      a.world = std::atoi(argv[i + 1]);
    else if (k == "--iters")
      a.iters = std::atoi(argv[i + 1]);
    else if (k == "--warmup")
      a.warmup = std::atoi(argv[i + 1]);
    else if (k == "--backend")
      a.backend = argv[i + 1];
    else if (k == "--scaling")
      a.scaling = std::atoi(argv[i + 1]);
    else if (k == "--shared-buckets")
      a.shared_buckets = std::atoi(argv[i + 1]) != 0;
    else
      std::fprintf(stderr, "ddp_overlap: unknown option %s\n", k.c_str()), std::exit(2);
  }
  return a;
}

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(784, 4096))),
        fc2(register_module("fc2", torch::nn::Linear(4096, 4096))),
        fc3(register_module("fc3", torch::nn::Linear(4096, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc3(torch::relu(fc2(torch::relu(fc1(x))))); }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

// The main job's CNN: conv(1->32, 3) relu maxpool conv(32->64, 3) relu maxpool fc(1600->128) relu
// fc(128->10).
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)))),
        fc1(register_module("fc1", torch::nn::Linear(1600, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    return fc2(torch::relu(fc1(x.flatten(1))));
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Cnn);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Samples/s of whole DDP training steps on the CNN, over all ranks (rank 0 prints).
void run_scaling(const Args& a, std::shared_ptr<lockstep::ProcessGroup> pg) {
  Cnn net;
  lockstep::torch::DistributedDataParallel ddp(net, pg);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto x = torch::randn({64, 1, 28, 28});
  auto y = torch::randint(0, 10, {64});
  auto step = [&] {
    opt.zero_grad();
    torch::nn::functional::cross_entropy(ddp(x), y).backward();
    opt.step();
  };
  for (int i = 0; i < a.warmup; ++i) step();
  pg->barrier()->wait();
  auto t0 = Clock::now();
  for (int i = 0; i < a.iters; ++i) step();
  pg->barrier()->wait();
  double seconds = ms_since(t0) / 1e3;
  if (pg->rank() == 0) {
    std::printf(
        "ddp_overlap --scaling: main-job CNN, batch 64 per rank, world %d, backend %s: "
        "%.0f samples/s (%d steps in %.2f s)\n",
        pg->size(), pg->backend_name().c_str(), 64.0 * a.iters * pg->size() / seconds, a.iters,
        seconds);
  }
}

struct Sample {
  double backward, allreduce, ddp_backward, exposed;
};

void run_rank(const Args& a, std::shared_ptr<lockstep::ProcessGroup> pg) {
  torch::manual_seed(pg->rank());
  Mlp net;
  auto x = torch::randn({64, 784});
  auto y = torch::randint(0, 10, {64});
  lockstep::torch::DistributedDataParallel ddp(net, pg, {.shared_buckets = a.shared_buckets});
  // Scratch buckets of DDP's sizes (1 MiB cap, then 25 MiB) for the allreduce alone, in the same
  // kind of memory as DDP's (from allocate with shared buckets).
  std::vector<torch::Tensor> buckets;
  std::vector<lockstep::SharedBuffer> memory;
  for (const auto& names : ddp.bucket_layout()) {
    int64_t n = 0;
    for (const auto& name : names) n += net->named_parameters()[name].numel();
    if (a.shared_buckets) {
      memory.push_back(pg->allocate(static_cast<size_t>(n) * sizeof(float)));
      buckets.push_back(torch::from_blob(memory.back().data(), {n}));
    } else {
      buckets.push_back(torch::zeros({n}));
    }
  }
  // Forward outside the timed region; time backward. `model` is the bare module or DDP.
  auto time_backward = [&](auto& model) {
    net->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model(x), y);
    pg->barrier()->wait();
    auto t0 = Clock::now();
    loss.backward();
    return ms_since(t0);
  };
  auto time_allreduce = [&] {
    pg->barrier()->wait();
    auto t0 = Clock::now();
    std::vector<lockstep::WorkPtr> works;
    for (auto& b : buckets) {
      works.push_back(pg->all_reduce(
          lockstep::BufferView{b.data_ptr(), static_cast<size_t>(b.numel()), lockstep::DType::f32},
          {.op = lockstep::ReduceOp::avg}));
    }
    for (auto& w : works) w->wait();
    return ms_since(t0);
  };
  std::vector<Sample> samples;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    Sample s{};
    s.backward = time_backward(net);  // hooks fire but do nothing: no DDP forward armed them
    s.allreduce = time_allreduce();
    double waited = ddp.stats().comm_wait_seconds;
    s.ddp_backward = time_backward(ddp);
    s.exposed = 1e3 * (ddp.stats().comm_wait_seconds - waited);
    if (i >= a.warmup) samples.push_back(s);
  }
  if (pg->rank() != 0) return;
  auto med = [&](double Sample::*field) {
    std::vector<double> v;
    for (const auto& s : samples) v.push_back(s.*field);
    return median(v);
  };
  double backward = med(&Sample::backward), allreduce = med(&Sample::allreduce);
  double ddp_backward = med(&Sample::ddp_backward), exposed = med(&Sample::exposed);
  auto stats = ddp.stats();
  std::printf(
      "ddp_overlap: 784-4096-4096-10 MLP (%.1fM parameters), batch 64 per rank, world %d, "
      "backend %s, %s buckets (%lld of %lld in memory every rank maps), medians of %d "
      "iterations\n",
      (784 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10) / 1e6, pg->size(),
      pg->backend_name().c_str(), a.shared_buckets ? "shared" : "private",
      static_cast<long long>(stats.shared_buckets), static_cast<long long>(stats.buckets), a.iters);
  std::printf("  backward alone                     %8.1f ms\n", backward);
  std::printf("  allreduce alone (%zu buckets)        %8.1f ms\n", buckets.size(), allreduce);
  std::printf("  backward + allreduce, in sequence  %8.1f ms\n", backward + allreduce);
  std::printf("  backward under DDP                 %8.1f ms\n", ddp_backward);
  std::printf("    of which waiting at the end      %8.1f ms\n", exposed);
  std::printf("  allreduce hidden behind backward   %8.0f %%\n", 100 * (1 - exposed / allreduce));
  std::printf("  buckets launched during backward   %lld of %lld\n",
              static_cast<long long>(stats.early_launched),
              static_cast<long long>(stats.buckets_launched));
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  at::set_num_threads(1);
  if (std::getenv("WORLD_SIZE") != nullptr) {
    auto pg = lockstep::init_process_group({.backend = a.backend});
    a.scaling ? run_scaling(a, pg) : run_rank(a, pg);
    return 0;
  }
  auto store = std::make_shared<lockstep::HashStore>();
  std::vector<std::thread> ranks;
  for (int r = 0; r < a.world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto pg = lockstep::init_process_group(
            {.backend = a.backend, .rank = r, .world_size = a.world, .store = store});
        a.scaling ? run_scaling(a, pg) : run_rank(a, pg);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ddp_overlap: rank %d: %s\n", r, e.what());
        std::exit(1);
      }
    });
  }
  for (auto& t : ranks) t.join();
  return 0;
}
