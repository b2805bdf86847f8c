// A cheap, coarse reading of Clock (steady_clock), for checks that run on every round of a hot
// loop but only care about milliseconds: deadlines, liveness looks. CLOCK_MONOTONIC_COARSE is the
// clock steady_clock reads, as of the last scheduler tick (1 to 10 ms old), for a few ns rather
// than the ~30 ns (and more on some VMs) of a precise read.
#pragma once

#include <time.h>

#include <chrono>

#include "lockstep/core/deadline.h"

namespace lockstep {

// The last tick's time: never later than Clock::now(), and at most kCoarseClockLag earlier.
inline Clock::time_point coarse_now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

// An upper bound on how far coarse_now() lags behind (HZ is at least 100).
inline constexpr std::chrono::milliseconds kCoarseClockLag{10};

}  // namespace lockstep
