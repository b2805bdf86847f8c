// What a Future (lockstep/rpc/rpc.h) shares: done or not, and then a value, a reply message still
// to decode, or an error; and the callbacks to run when it completes. The agent completes a call's
// state with its reply message; Python decodes that message itself (no C++ Value in between).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "lockstep/rpc/rpc.h"
#include "rpc/message.h"

namespace lockstep::rpc::internal {

struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<Value> value;
  std::optional<Message> reply;  // a reply not yet decoded
  std::exception_ptr error;
  std::vector<std::function<void(const Future&)>> callbacks;

  // Each completes the state once (false when it was done already) and runs the callbacks.
  bool complete_value(std::shared_ptr<FutureState> self, Value v);
  bool complete_reply(std::shared_ptr<FutureState> self, Message m);
  bool complete_error(std::shared_ptr<FutureState> self, std::exception_ptr e);
  // Blocks until done.
  void wait_done();

 private:
  // Completes with what set() stores, unless done already.
  template <class Set>
  bool complete(std::shared_ptr<FutureState>& self, Set&& set);
};

}  // namespace lockstep::rpc::internal
