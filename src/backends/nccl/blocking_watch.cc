#include "backends/nccl/blocking_watch.h"

namespace lockstep::nccl {

namespace {
constexpr auto kPoll = std::chrono::milliseconds(100);
}

BlockingWatch::BlockingWatch(std::function<std::optional<std::string>()> check,
                             std::function<void(const std::string&)> fire)
    : check_(std::move(check)), fire_(std::move(fire)) {}

BlockingWatch::~BlockingWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BlockingWatch::arm(Deadline deadline) {
  deadline_.store(deadline.at().time_since_epoch().count());
  armed_.store(true);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void BlockingWatch::disarm() {
  armed_.store(false);
}

std::optional<std::string> BlockingWatch::fired() const {
  if (!has_fired_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

void BlockingWatch::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, kPoll, [&] { return stop_; });
    if (stop_ || fired_ || !armed_.load()) continue;
    lock.unlock();
    std::optional<std::string> reason = check_();
    const auto deadline = Clock::time_point(Clock::duration(deadline_.load()));
    if (!reason && Clock::now() >= deadline) reason = "";
    // Disarmed meanwhile: the call returned by itself, so nothing is aborted.
    if (reason && armed_.load()) {
      lock.lock();
      fired_ = reason;  // first, so that the unblocked caller finds the reason
      has_fired_.store(true);
      lock.unlock();
      fire_(*reason);
      lock.lock();
      continue;
    }
    lock.lock();
  }
}

}  // namespace lockstep::nccl
