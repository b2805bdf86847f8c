#include "launcher/store_link.h"

#include <algorithm>

#include "launcher/rendezvous.h"
#include "launcher/signals.h"

namespace lockstep::launcher {

using std::chrono::milliseconds;

void throw_if_interrupted(SignalCatcher& signals) {
  signals.drain();
  if (signals.first_termination() != 0) throw Interrupted(signals.first_termination());
}

std::unique_ptr<TcpStore> connect_store(const StoreLink& link, Deadline deadline,
                                        SignalCatcher& signals) {
  auto next_note = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    throw_if_interrupted(signals);
    try {
      auto store = std::make_unique<TcpStore>(TcpStoreOptions{
          .host = link.host,
          .port = static_cast<uint16_t>(link.port),
          .timeout = std::min(kConnectSlice, std::max(deadline.remaining(), milliseconds(1))),
          .secret = link.secret});
      store->set_timeout(link.call_timeout);
      return store;
    } catch (const TimeoutError& e) {
      if (deadline.expired()) throw TimeoutError(link.gave_up(e.what()));
    }
    if (Clock::now() >= next_note) {
      if (link.still_waiting) link.still_waiting();
      next_note = Clock::now() + std::chrono::seconds(10);
    }
  }
}

bool wait_keys(TcpStore& store, SignalCatcher& signals, const std::vector<std::string>& keys,
               Deadline deadline) {
  for (;;) {
    throw_if_interrupted(signals);
    try {
      store.wait(keys, std::min(kSlice, std::max(deadline.remaining(), milliseconds(1))));
      return true;
    } catch (const TimeoutError&) {
      if (deadline.expired()) return false;
    }
  }
}

}  // namespace lockstep::launcher
