// Connections refused for authentication (src/net/peer_auth.h) or turned away at the store's
// handshake (another secret, a missing one, another protocol), recorded in the job's store so
// that `lockstep doctor` can say so, and so that a rendezvous still waiting for ranks can name the
// refused client instead of waiting out its timeout (RefusalWatch). Best effort and rate-limited
// by the callers: a refusal never fails or slows the job it protects.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "lockstep/store/store.h"

namespace lockstep {

// Outside every group's and attempt's key space (a PrefixStore's base is used).
inline constexpr const char* kRefusedCountKey = "lockstep/auth/refused";
inline constexpr const char* kRefusedLastKey = "lockstep/auth/refused_last";

// Adds `count` refusals and records `last` ("group 'default' rank 0: 10.0.0.9:5123 claiming rank
// 1: refused: wrong proof"). Never throws.
void note_refusals(Store& store, int64_t count, const std::string& last) noexcept;

struct Refusals {
  int64_t count = 0;
  std::string last;
};
// What the job's store holds (zero and "" when nothing was refused). Throws what the store throws.
Refusals read_refusals(Store& store);

// [Refused while waiting] How long a rendezvous that still misses ranks waits after the store
// refused a client before it gives up naming that client: the refused process may well be the
// missing rank (started with another secret), but a stray connection (a port scanner) must not
// fail a job whose ranks all arrive within this grace.
inline constexpr std::chrono::milliseconds kRefusalGrace{3000};
// How often a waiting rendezvous looks (one store request each time).
inline constexpr std::chrono::milliseconds kRefusalPoll{500};

// Watches the refusals a rendezvous's store records while it waits ([Refused while waiting]).
// Not thread-safe.
class RefusalWatch {
 public:
  // Counts the refusals after construction, or with `count_earlier` every one the store holds (a
  // store of this job alone, which a refusal just before the wait began must not escape).
  explicit RefusalWatch(Store& store, bool count_earlier = false,
                        std::chrono::milliseconds grace = kRefusalGrace);
  // The last refusal's text once the grace since the first new refusal has passed; nullopt
  // before, or when the store cannot be read. One store request.
  std::optional<std::string> overdue();

 private:
  Store& store_;
  std::chrono::milliseconds grace_;
  int64_t seen_ = 0;
  std::optional<std::chrono::steady_clock::time_point> first_;
};

}  // namespace lockstep
