// Progress display of one epoch on rank 0: a redrawn bar on a terminal, periodic lines otherwise
// (a log file or a pipe, e.g. under `lockstep run`, which pipes the ranks' output).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace train_fashion_mnist {

struct ProgressOptions {
  bool enabled = true;          // false on ranks other than 0: every call does nothing
  size_t total_steps = 0;       // steps in the epoch
  size_t samples_per_step = 0;  // over all ranks
  std::string label;            // e.g. "epoch 2/3"
};

class Progress {
 public:
  // Decides between bar and lines by whether stderr is a terminal.
  explicit Progress(ProgressOptions options);

  // Records a finished step with this rank's loss; redraws at most 10 times a second (bar) or
  // prints a line every 5 seconds (lines).
  void step(double loss);
  // Clears the bar (the epoch summary follows on its own line).
  void finish();

 private:
  void draw();

  using Clock = std::chrono::steady_clock;
  ProgressOptions options_;
  bool terminal_ = false;
  size_t steps_ = 0;
  double smoothed_loss_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_ = Clock::now();
};

}  // namespace train_fashion_mnist
