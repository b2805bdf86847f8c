// Connections refused for authentication (src/net/peer_auth.h), recorded in the job's store so
// that `lockstep doctor` can say so: the INFO line naming the address is in the refusing
// process's log only. Best effort and rate-limited by the callers: a refusal never fails or slows
// the job it protects.
#pragma once

#include <cstdint>
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

}  // namespace lockstep
