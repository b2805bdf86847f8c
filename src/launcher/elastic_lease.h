// Leases of an elastic job's launchers: each renews its own in the store from a thread of its own
// (LeaseKeeper), so that it stays fresh while the main thread waits on ranks or a rendezvous;
// the others watch it (LeaseWatch) and call a launcher gone when its lease has not moved for
// --rdzv-keep-alive on their own clock (the hosts' clocks need not agree).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "lockstep/core/deadline.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::launcher {

// The key of launcher `id`'s lease (a counter).
std::string lease_key(int id);

class LeaseKeeper {
 public:
  // Renews `id`'s lease every `interval` through its own connection (made from `connection`).
  // Renewal errors are ignored: the store's host being gone is noticed by the main thread.
  LeaseKeeper(TcpStoreOptions connection, int id, std::chrono::milliseconds interval);
  ~LeaseKeeper();  // stops the thread
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  void loop(TcpStoreOptions connection);

  int id_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

class LeaseWatch {
 public:
  explicit LeaseWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  // Reads launcher `id`'s lease; true when it has not moved for the timeout since this watch
  // first read it. Throws what the store throws.
  bool expired(TcpStore& store, int id);
  // Seconds since launcher `id`'s lease last moved, as this watch saw it.
  double silent_seconds(int id) const;

 private:
  struct Seen {
    int64_t value = 0;
    Clock::time_point since;
  };
  std::chrono::milliseconds timeout_;
  std::map<int, Seen> seen_;
};

}  // namespace lockstep::launcher
