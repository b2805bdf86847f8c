// OpJournal: where the sends and recvs that a group's p2p engine moves are journaled, so that they
// show in the flight recorder's dumps and traces (src/debug/flight_recorder.h implements it)
// beside the ops the progress queue runs. The engine never waits in it: an entry is a few atomic
// stores.
#pragma once

#include <cstdint>

#include "comm/op.h"

namespace lockstep {

inline constexpr uint64_t kNoRecord = ~uint64_t{0};

class OpJournal {
 public:
  virtual ~OpJournal() = default;
  // A send or recv the engine starts at once (queued and started in one). Called under the
  // group's issue lock, like every op's first entry. Returns its id, for on_p2p_ended.
  virtual uint64_t on_p2p_posted(const Op& op) = 0;
  // Its end. Any thread, concurrently with the group's other ops.
  virtual void on_p2p_ended(uint64_t id, bool ok) = 0;
};

}  // namespace lockstep
