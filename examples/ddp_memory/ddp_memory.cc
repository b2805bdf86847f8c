// Per-rank memory and step time of DDP with Adam: a whole optimizer on every rank (--zero 0),
// ZeRO-1 (--zero 1: optimizer state sharded) and ZeRO-2 (--zero 2: gradients sharded too).
//
//   lockstep run --nproc-per-node 2 -- ddp_memory --zero 2 [--iters 6] [--hidden 4096]
//
// The model is an MLP of L hidden layers of width H, 784-H-...-H-10 (defaults L = 20, H = 1024:
// 20.8M parameters, 83 MB of f32, in 20 weight matrices of about 1M parameters: ZeRO partitions
// whole parameters, so a model of one dominant matrix could not be balanced), batch 64 per rank.
// Each rank measures its resident memory (VmRSS, after malloc_trim so that freed memory is not
// counted) before building the model, and after the last step (the steady state between
// iterations), and its peak (VmHWM); the differences are the training's. Rank 0 prints the largest
// of each over the ranks, the median step time, and the largest over the ranks of what the formula
// predicts for the steady state, with P the parameters' bytes and S the bytes of the parameters the
// rank owns (about P/N):
//   --zero 0   P (parameters) + P (gradients) + P (DDP's buckets) + 2P (Adam's two moments)
//   --zero 1   P + P + P + 2S
//   --zero 2   P + S (the gradients this rank owns) + 2S (no buckets between iterations)
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "lockstep/group/init.h"
#include "lockstep/torch/ddp.h"
#include "lockstep/torch/zero.h"

namespace {

namespace nn = torch::nn;
using Clock = std::chrono::steady_clock;

struct Options {
  int zero = 0;
  int iters = 6;
  int64_t hidden = 1024;
  int layers = 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (key == "--zero" && value >= 0 && value <= 2) {
      o.zero = static_cast<int>(value);
    } else if (key == "--iters" && value > 0) {
      o.iters = static_cast<int>(value);
    } else if (key == "--hidden" && value > 0) {
      o.hidden = value;
    } else if (key == "--layers" && value > 0) {
      o.layers = static_cast<int>(value);
    } else {
      throw std::invalid_argument(
          "usage: ddp_memory [--zero 0|1|2] [--iters N] [--hidden H] [--layers L]");
    }
  }
  return o;
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM").
double status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == field + ":") {
      in >> kb;
      return kb * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

double resident_bytes() {
  malloc_trim(0);
  return status_bytes("VmRSS");
}

// The largest of `value` over the group.
double group_max(lockstep::ProcessGroup& group, double value) {
  group
      .all_reduce(lockstep::BufferView{&value, 1, lockstep::DType::f64},
                  {.op = lockstep::ReduceOp::max})
      ->wait();
  return value;
}

int run(const Options& o) {
  at::set_num_threads(1);
  auto group = lockstep::init_process_group();
  const double before = resident_bytes();
  torch::manual_seed(0);
  nn::Sequential net(nn::Linear(784, o.hidden), nn::ReLU());
  for (int l = 1; l < o.layers; ++l) {
    net->push_back(nn::Linear(o.hidden, o.hidden));
    net->push_back(nn::ReLU());
  }
  net->push_back(nn::Linear(o.hidden, 10));
  lockstep::torch::DdpOptions ddp_options;
  ddp_options.shared_buckets = false;  // private memory: all of it counts in VmRSS alike
  lockstep::torch::DistributedDataParallel ddp(net, group, ddp_options);
  auto adam = [](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-4));
  };
  std::unique_ptr<torch::optim::Optimizer> whole;
  std::unique_ptr<lockstep::torch::ZeroRedundancyOptimizer> sharded;
  if (o.zero == 0) {
    whole = adam(net->parameters());
  } else {
    sharded =
        std::make_unique<lockstep::torch::ZeroRedundancyOptimizer>(net->parameters(), group, adam);
    if (o.zero == 2) ddp.shard_gradients(*sharded);
  }
  const torch::Tensor x = torch::randn({64, 784});
  const torch::Tensor y = torch::randint(0, 10, {64});
  std::vector<double> step_seconds;
  for (int i = 0; i < o.iters; ++i) {
    const auto start = Clock::now();
    whole ? whole->zero_grad() : sharded->zero_grad();
    torch::nn::functional::cross_entropy(ddp(x), y).backward();
    if (whole) {
      whole->step();
    } else {
      sharded->step();
    }
    step_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  const double steady = group_max(*group, resident_bytes() - before);
  const double peak = group_max(*group, status_bytes("VmHWM") - before);
  std::sort(step_seconds.begin() + 1, step_seconds.end());  // the first step allocates: skip it
  double median = step_seconds[1 + (step_seconds.size() - 1) / 2];
  median = group_max(*group, median);
  double p = 0, owned = 0;
  const auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const double bytes = static_cast<double>(params[i].numel() * params[i].element_size());
    p += bytes;
    if (sharded && sharded->owner(i) == group->rank()) owned += bytes;
  }
  const double n = group->size();
  const double formula = group_max(*group, o.zero == 0   ? 5 * p
                                           : o.zero == 1 ? 3 * p + 2 * owned
                                                         : p + 3 * owned);
  if (group->rank() == 0) {
    std::printf(
        "ddp_memory: world %d, zero %d, %.1fM parameters (P = %.0f MB): per rank steady %.0f MB "
        "(formula %.0f MB), peak %.0f MB; step %.0f ms (median of %d), %.0f samples/s\n",
        group->size(), o.zero, p / 4e6, p / 1e6, steady / 1e6, formula / 1e6, peak / 1e6,
        median * 1e3, o.iters - 1, 64 * n / median);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_memory: error: %s\n", e.what());
    return 1;
  }
}
