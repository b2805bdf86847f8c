// What the DDP reducer writes to the INFO log (LOCKSTEP_DEBUG=INFO or DETAIL): the bucket
// layout, and the mean time of each phase of an iteration every LOCKSTEP_DEBUG_EVERY iterations.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"

namespace lockstep::ddp {

// "3 buckets (caps 1.00 MiB first, then 25.00 MiB): bucket 0: f32, 2 parameters, 4.0 KiB
// ['fc3.bias', 'fc3.weight']; ...". Names past the first few of a bucket are counted, not listed.
std::string layout_text(std::span<const BucketSpec> buckets, std::span<const ParamSpec> params,
                        const BucketSizes& sizes);

// [Iteration phases] forward: from forward_started() (or, when the framework does not report
// it, the end of the previous iteration) to backward_started(); backward: to reduce_started()
// (the end of backward); reduction: to finished(), the time spent waiting for the last buckets
// after backward (the communication that overlap did not hide).
class IterationTimes {
 public:
  // Disabled: every call returns at once. Else logs the means every `every` iterations, after
  // `what` (the caller's name).
  IterationTimes(std::string what, bool enabled, int every);

  void forward_started();
  void backward_started();
  void reduce_started();
  // Ends an iteration; logs when `every` iterations have ended since the last line.
  void finished();
  // The last line logged ("" before the first).
  const std::string& last_line() const { return last_line_; }

 private:
  using Clock = std::chrono::steady_clock;

  std::string what_;
  bool enabled_;
  int every_;
  bool have_forward_ = false;
  bool have_end_ = false;
  Clock::time_point forward_{}, backward_{}, reduce_{}, end_{};
  int64_t iterations_ = 0;                                              // ended so far
  int64_t window_ = 0;                                                  // ended since the last line
  double forward_s_ = 0, backward_s_ = 0, reduce_s_ = 0, total_s_ = 0;  // sums over the window
  std::string last_line_;
};

}  // namespace lockstep::ddp
