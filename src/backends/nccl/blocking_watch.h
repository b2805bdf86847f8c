// BlockingWatch: bounds NCCL calls that wait inside NCCL ([Blocking mode] in communicator.h).
//
// A blocking communicator's init, ncclGroupEnd, finalize, and an op's first use of a connection
// (NCCL connects lazily, with the peer's participation) return only when NCCL is done: a peer
// that never arrives would hang the calling thread, where lockstep's own polling cannot run. So
// while such a call is armed, a thread of the watch looks every 100 ms at the deadline and at
// check() (another rank's abort note, a dead peer on this host); the first of them fires fire()
// once, which aborts the communicator from that thread, as PyTorch's watchdog does: the blocked
// call then returns with an error, and the caller raises fired()'s reason instead of NCCL's.
//
// Arming costs two atomic stores: the thread polls, nobody signals it. It starts on the first
// arm(), so non-blocking communicators never have one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "lockstep/core/deadline.h"

namespace lockstep::nccl {

class BlockingWatch {
 public:
  // check: a reason to give up now, or nothing. fire: aborts; called at most once, with the
  // reason ("" for the deadline), from the watch's thread.
  BlockingWatch(std::function<std::optional<std::string>()> check,
                std::function<void(const std::string& reason)> fire);
  ~BlockingWatch();
  BlockingWatch(const BlockingWatch&) = delete;
  BlockingWatch& operator=(const BlockingWatch&) = delete;

  // Watches until disarm(), giving up at deadline.
  void arm(Deadline deadline);
  void disarm();
  // Whether fire() ran, and with what reason ("" for the deadline).
  std::optional<std::string> fired() const;

 private:
  void loop();

  std::function<std::optional<std::string>()> check_;
  std::function<void(const std::string&)> fire_;
  std::atomic<bool> armed_{false};
  std::atomic<bool> has_fired_{false};   // fired_ is set: lets fired() skip the lock
  std::atomic<Clock::rep> deadline_{0};  // Clock ticks since its epoch
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::optional<std::string> fired_;
  std::thread thread_;
};

// Arms a watch for one scope; a null watch does nothing.
class ArmedWatch {
 public:
  ArmedWatch(BlockingWatch* watch, Deadline deadline) : watch_(watch) {
    if (watch_) watch_->arm(deadline);
  }
  ~ArmedWatch() {
    if (watch_) watch_->disarm();
  }
  ArmedWatch(const ArmedWatch&) = delete;
  ArmedWatch& operator=(const ArmedWatch&) = delete;

 private:
  BlockingWatch* watch_;
};

}  // namespace lockstep::nccl
