#include "launcher/elastic_lease.h"

namespace lockstep::launcher {

std::string lease_key(int id) {
  return "lockstep_launcher/elastic/lease/" + std::to_string(id);
}

LeaseKeeper::LeaseKeeper(TcpStoreOptions connection, int id, std::chrono::milliseconds interval)
    : id_(id), interval_(interval) {
  thread_ = std::thread([this, connection] { loop(connection); });
}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LeaseKeeper::loop(TcpStoreOptions connection) {
  connection.timeout = std::max(interval_ * 2, std::chrono::milliseconds(500));
  std::unique_ptr<TcpStore> store;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    try {
      if (!store) store = std::make_unique<TcpStore>(connection);
      store->add(lease_key(id_), 1);
    } catch (const std::exception&) {
      store.reset();  // reconnect next time; the main thread reports a lost store
    }
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

bool LeaseWatch::expired(TcpStore& store, int id) {
  const int64_t value = store.add(lease_key(id), 0);
  const auto now = Clock::now();
  auto [it, inserted] = seen_.try_emplace(id, Seen{value, now});
  if (!inserted && it->second.value != value) it->second = Seen{value, now};
  return now - it->second.since >= timeout_;
}

double LeaseWatch::silent_seconds(int id) const {
  auto it = seen_.find(id);
  if (it == seen_.end()) return 0;
  return std::chrono::duration<double>(Clock::now() - it->second.since).count();
}

}  // namespace lockstep::launcher
