// OpJournal: where the sends and recvs that a group's p2p engine moves are journaled, so that they
// show in the flight recorder's dumps and traces (src/debug/flight_recorder.h implements it)
// beside the ops the progress queue runs. The engine never waits in it: an entry is a few atomic
// stores.
//
// Times are readings of the coarse clock (coarse_now(), src/core/coarse_clock.h) that the caller
// takes anyway, for the op's deadline or its progress round: on the p2p fast path a clock read is
// a measurable share of a 4-byte shm round trip, so the journal reads none itself.
#pragma once

#include <cstdint>

#include "comm/op.h"
#include "lockstep/core/deadline.h"

namespace lockstep {

inline constexpr uint64_t kNoRecord = ~uint64_t{0};

class OpJournal {
 public:
  virtual ~OpJournal() = default;
  // A send or recv the engine starts at once (queued and started in one). Called under the
  // group's issue lock, like every op's first entry, at coarse time `posted`. Returns its id,
  // for on_p2p_ended.
  virtual uint64_t on_p2p_posted(const Op& op, Clock::time_point posted) = 0;
  // Its end, at coarse time `ended`. Any thread, concurrently with the group's other ops.
  virtual void on_p2p_ended(uint64_t id, bool ok, Clock::time_point ended) = 0;
};

}  // namespace lockstep
