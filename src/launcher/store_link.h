// The launcher's link to its job's store, shared by NodeSync and ElasticSync: connecting with
// retries, and waits in slices short enough (kSlice) that a termination signal gets through
// (Interrupted) while the launcher waits for other nodes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/deadline.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::launcher {

class SignalCatcher;

inline constexpr std::chrono::milliseconds kSlice{500};          // longest uninterruptible wait
inline constexpr std::chrono::milliseconds kConnectSlice{1000};  // one connection try

// Throws Interrupted when a termination signal has arrived.
void throw_if_interrupted(SignalCatcher& signals);

struct StoreLink {
  std::string host;
  int port = 0;
  std::string secret;
  std::chrono::milliseconds call_timeout{kSlice * 4};  // of each later store call
  // The TimeoutError's text when `deadline` passes, given the last attempt's error.
  std::function<std::string(const std::string& last_error)> gave_up;
  // Called every 10 s while still trying.
  std::function<void()> still_waiting;
};

// Connects, retrying until deadline (then TimeoutError with link.gave_up's text).
std::unique_ptr<TcpStore> connect_store(const StoreLink& link, Deadline deadline,
                                        SignalCatcher& signals);

// Waits for keys in slices; false when the deadline passed.
bool wait_keys(TcpStore& store, SignalCatcher& signals, const std::vector<std::string>& keys,
               Deadline deadline);

}  // namespace lockstep::launcher
