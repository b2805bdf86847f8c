#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace train_fashion_mnist {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kBarInterval = std::chrono::milliseconds(100);
constexpr auto kLineInterval = std::chrono::seconds(5);

}  // namespace

Progress::Progress(ProgressOptions options)
    : options_(std::move(options)), terminal_(::isatty(STDERR_FILENO) == 1) {}

void Progress::step(double loss) {
  if (!options_.enabled) return;
  ++steps_;
  // Exponential moving average: the bar shows a readable trend, not one batch's noise.
  smoothed_loss_ = steps_ == 1 ? loss : 0.95 * smoothed_loss_ + 0.05 * loss;
  const auto now = Clock::now();
  if (now - last_draw_ >= (terminal_ ? kBarInterval : kLineInterval)) {
    last_draw_ = now;
    draw();
  }
}

void Progress::finish() {
  if (!options_.enabled) return;
  if (terminal_) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

void Progress::draw() {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = seconds > 0 ? steps_ * options_.samples_per_step / seconds : 0;
  const size_t total = options_.total_steps ? options_.total_steps : 1;
  if (!terminal_) {
    std::fprintf(stderr, "%s: step %zu/%zu, loss %.4f, %.0f samples/s\n", options_.label.c_str(),
                 steps_, options_.total_steps, smoothed_loss_, rate);
    return;
  }
  const int filled = static_cast<int>(kBarWidth * std::min<size_t>(steps_, total) / total);
  std::string bar(filled, '#');
  bar.resize(kBarWidth, '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %zu/%zu  loss %.4f  %.0f samples/s", options_.label.c_str(),
               bar.c_str(), steps_, options_.total_steps, smoothed_loss_, rate);
  std::fflush(stderr);
}

}  // namespace train_fashion_mnist
