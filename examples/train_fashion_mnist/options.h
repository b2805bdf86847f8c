// Command-line options of train_fashion_mnist (plain C++: no LibTorch here, so it compiles fast).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace train_fashion_mnist {

struct Options {
  int epochs = 3;
  size_t batch_size = 64;  // per rank
  double lr = 0.1;         // peak learning rate
  double momentum = 0.9;
  bool nesterov = true;
  bool cosine = true;  // decay the learning rate to 0 over the run (cosine); else constant
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string checkpoint_dir = "checkpoints";
  bool resume = false;
  size_t checkpoint_every = 0;  // also checkpoint every N steps within an epoch; 0: epoch ends only
  std::string save_weights;     // rank 0 writes the final parameters and buffers here (raw bytes)
  size_t subset = 0;            // 0: the whole training set
  size_t max_steps = 0;         // per epoch; 0: the whole epoch (for benchmarks)
  int threads = 1;              // intra-op threads per rank
  uint64_t seed = 0;
  std::string backend = "auto";
  int zero = 0;  // 0: a replicated optimizer; 1: ZeRO-1 (sharded state); 2: ZeRO-2 (+ gradients)
  bool uneven = false;  // rank r trains on a share of weight r + 1 of each epoch, under a Join
  bool help = false;
};

// Parses argv (argv[0] is the program). Throws std::invalid_argument naming the bad option.
Options parse_options(int argc, char** argv);

// The --help text.
std::string usage_text();

}  // namespace train_fashion_mnist
