// Watchdog: a group's flight recorder, its status publisher and its stall inspector.
//
// One thread per group wakes a few times a second (see tick_interval) and
//   - publishes this rank's progress to its status key when it changed (src/debug/status_keys.h),
//     so that other ranks can tell where this one is without touching the data path;
//   - when an op has been in flight longer than the stall threshold, logs a warning naming the
//     ranks that never entered it, as Horovod's stall inspector does:
//       all_reduce #57 waiting 60 s for ranks [3]; last completed: rank 0 #56, ...
//     and again at every further multiple of the threshold.
// On the first failure of the group, explain_failure() dumps the recorder (flight_recorder_dump.h)
// and, for a timeout, names the ranks that never entered the op and each rank's last completed op
// (and records them in a blame key for the launcher). A SIGTERM dumps it too (signal_dump.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "debug/flight_recorder.h"
#include "debug/status_keys.h"
#include "lockstep/store/store.h"

namespace lockstep::debug {

struct WatchdogOptions {
  std::string group;
  int rank = 0;
  int size = 1;
  int global_rank = 0;
  std::vector<int> global_ranks;  // member i's global rank; empty: the identity
  std::string host;
  std::string backend;
  std::shared_ptr<Store> store;                // the job's store; status keys go there
  std::shared_ptr<Store> report_store;         // blame keys go there; null: store
  std::chrono::milliseconds timeout{300'000};  // the group's default op timeout
  std::chrono::milliseconds stall_warning{0};  // 0: min(60 s, timeout / 2)
  size_t recorder_size = 2000;
  std::string trace_dir = "lockstep-trace";
};

class Watchdog {
 public:
  // Publishes this rank's (empty) status, then starts the thread.
  explicit Watchdog(WatchdogOptions options);
  // Stops the thread (within one tick).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  FlightRecorder& recorder() { return recorder_; }
  std::chrono::milliseconds stall_threshold() const { return stall_; }

  // For the first op of the group that failed, after the recorder marked it failed: returns the
  // message to raise instead of `what`. For a timed-out collective it starts with
  // "<op summary> timed out after X s on rank R: ranks [..] never entered it; last completed: ..."
  // (unless `what` already carries such a summary, as a peer's abort reason does). It always ends
  // with the dump's path. Never throws.
  std::string explain_failure(const Op& op, const std::string& what, bool timed_out);
  // Writes the dump with `reason` now and returns its path. Throws Error when it cannot.
  std::string dump(const std::string& reason) const;

 private:
  void loop();
  void publish_if_changed(bool force);
  void warn_if_stalled();
  std::string timeout_summary(const Op& op);
  // blamed_op: when not empty, the op this rank timed out in; the ranks that never entered it
  // are then recorded in a blame key.
  std::string statuses_text(uint64_t seq, bool waiting_form, const std::string& blamed_op);
  void blame(const std::vector<int>& missing, const std::string& op_summary);

  WatchdogOptions options_;
  FlightRecorder recorder_;
  std::chrono::milliseconds stall_;
  std::chrono::milliseconds tick_;

  std::mutex publish_mu_;
  Progress published_{~uint64_t{0}, 0, 0};     // last published; nothing yet
  uint64_t published_running_ = ~uint64_t{0};  // the recorder id of the op it named
  bool store_failed_ = false;                  // logged once

  uint64_t warned_id_ = ~uint64_t{0};  // the op the warnings count refers to (thread only)
  int warnings_ = 0;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lockstep::debug
