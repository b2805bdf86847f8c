#include "rpc/codec.h"
#include "rpc/future_state.h"

namespace lockstep::rpc {

namespace internal {

template <class Set>
bool FutureState::complete(std::shared_ptr<FutureState>& self, Set&& set) {
  std::unique_lock lock(mu);
  if (done) return false;
  set();
  done = true;
  auto run = std::move(callbacks);
  callbacks.clear();
  lock.unlock();
  cv.notify_all();
  Future f(self);
  for (auto& fn : run) fn(f);
  return true;
}

bool FutureState::complete_value(std::shared_ptr<FutureState> self, Value v) {
  return complete(self, [&] { value = std::move(v); });
}

bool FutureState::complete_reply(std::shared_ptr<FutureState> self, Message m) {
  return complete(self, [&] { reply = std::move(m); });
}

bool FutureState::complete_error(std::shared_ptr<FutureState> self, std::exception_ptr e) {
  return complete(self, [&] { error = std::move(e); });
}

void FutureState::wait_done() {
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
}

}  // namespace internal

Future Future::make() {
  return Future(std::make_shared<internal::FutureState>());
}

Value Future::wait() const {
  state_->wait_done();
  std::lock_guard lock(state_->mu);
  if (state_->error) std::rethrow_exception(state_->error);
  if (!state_->value && state_->reply) {
    Reader r(*state_->reply);
    Value v = decode(r);
    if (!r.at_end()) r.fail("bytes after the reply's value");
    state_->value = std::move(v);
    state_->reply.reset();
  }
  return state_->value ? *state_->value : Value();
}

bool Future::done() const {
  std::lock_guard lock(state_->mu);
  return state_->done;
}

bool Future::failed() const {
  std::lock_guard lock(state_->mu);
  return state_->done && state_->error;
}

void Future::then(std::function<void(const Future&)> fn) const {
  {
    std::lock_guard lock(state_->mu);
    if (!state_->done) {
      state_->callbacks.push_back(std::move(fn));
      return;
    }
  }
  fn(*this);
}

void Future::set_value(Value value) const {
  state_->complete_value(state_, std::move(value));
}

void Future::set_error(std::exception_ptr error) const {
  state_->complete_error(state_, std::move(error));
}

}  // namespace lockstep::rpc
