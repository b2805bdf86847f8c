// monitored_barrier over the store: a barrier that names every rank that did not arrive.
//
// Keys "<group>/monitored_barrier/<n>/arrived/<rank>" and ".../<n>/verdict". Every rank sets its
// arrival key; every rank but 0 then waits for the verdict, while rank 0 waits for every arrival
// key up to the timeout, then writes the verdict ("ok", or the ranks it did not see), so that all
// ranks fail or pass together. A rank that gets no verdict (rank 0 is missing too) names the ranks
// whose keys it does not see. Rank 0 deletes barrier n-1's keys once every rank has arrived at n.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "lockstep/store/store.h"

namespace lockstep::debug {

struct MonitoredBarrierArgs {
  std::string group;
  int rank = 0;
  int size = 1;
  uint64_t index = 0;  // the group's count of earlier monitored barriers
  std::chrono::milliseconds timeout{300'000};
};

// Blocks until every rank arrived; otherwise throws TimeoutError naming every missing rank.
void monitored_barrier(Store& store, const MonitoredBarrierArgs& args);

}  // namespace lockstep::debug
