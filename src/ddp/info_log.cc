#include "ddp/info_log.h"

#include <cstdio>

#include "core/log.h"

namespace lockstep::ddp {

namespace {

constexpr size_t kNamesPerBucket = 6;

std::string size_text(double bytes) {
  const char* unit = "B";
  for (const char* next : {"KiB", "MiB", "GiB"}) {
    if (bytes < 1024) break;
    bytes /= 1024;
    unit = next;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, unit);
  return buf;
}

std::string ms(double seconds, int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", 1e3 * seconds / static_cast<double>(n));
  return buf;
}

}  // namespace

std::string layout_text(std::span<const BucketSpec> buckets, std::span<const ParamSpec> params,
                        const BucketSizes& sizes) {
  std::string s = std::to_string(buckets.size()) + (buckets.size() == 1 ? " bucket" : " buckets") +
                  " (caps " + size_text(static_cast<double>(sizes.first_bucket_bytes)) +
                  " first, then " + size_text(static_cast<double>(sizes.bucket_bytes)) + ")";
  for (size_t b = 0; b < buckets.size(); ++b) {
    const BucketSpec& spec = buckets[b];
    s += (b ? "; bucket " : ": bucket ") + std::to_string(b) + ": " +
         std::string(dtype_name(spec.dtype)) + ", " + std::to_string(spec.params.size()) +
         (spec.params.size() == 1 ? " parameter, " : " parameters, ") +
         size_text(static_cast<double>(spec.bytes())) + " [";
    for (size_t i = 0; i < spec.params.size() && i < kNamesPerBucket; ++i)
      s += (i ? ", '" : "'") + params[spec.params[i]].name + "'";
    if (spec.params.size() > kNamesPerBucket)
      s += " and " + std::to_string(spec.params.size() - kNamesPerBucket) + " more";
    s += "]";
  }
  return s;
}

IterationTimes::IterationTimes(std::string what, bool enabled, int every)
    : what_(std::move(what)), enabled_(enabled), every_(every < 1 ? 1 : every) {}

void IterationTimes::forward_started() {
  if (!enabled_ || have_forward_) return;  // several forwards before one backward: the first
  forward_ = Clock::now();
  have_forward_ = true;
}

void IterationTimes::backward_started() {
  if (!enabled_) return;
  backward_ = Clock::now();
  if (!have_forward_) forward_ = have_end_ ? end_ : backward_;
}

void IterationTimes::reduce_started() {
  if (!enabled_) return;
  reduce_ = Clock::now();
}

void IterationTimes::finished() {
  if (!enabled_) return;
  end_ = Clock::now();
  have_end_ = true;
  have_forward_ = false;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  forward_s_ += seconds(backward_ - forward_);
  backward_s_ += seconds(reduce_ - backward_);
  reduce_s_ += seconds(end_ - reduce_);
  total_s_ += seconds(end_ - forward_);
  iterations_ += 1;
  window_ += 1;
  if (window_ < every_) return;
  last_line_ = what_ + ": iterations " + std::to_string(iterations_ - window_ + 1) + "-" +
               std::to_string(iterations_) + ", mean per iteration: forward " +
               ms(forward_s_, window_) + ", backward " + ms(backward_s_, window_) +
               ", reduction after backward " + ms(reduce_s_, window_) +
               " (communication not hidden by backward), total " + ms(total_s_, window_);
  log_info(last_line_);
  window_ = 0;
  forward_s_ = backward_s_ = reduce_s_ = total_s_ = 0;
}

}  // namespace lockstep::ddp
