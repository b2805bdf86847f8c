// HashStore: one map under one mutex; every change notifies one condition variable, and blocking
// calls wait on it until their keys exist or their deadline passes.
#include "lockstep/store/hash_store.h"

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "store/store_semantics.h"

namespace lockstep {

namespace sd = store_detail;

namespace {

constexpr const char* kWhere = "HashStore (in-process)";

// Waits on `changed` until every key is in data or the deadline passes (TimeoutError naming op
// and the missing keys). Returns with lock held.
template <class Map>
void wait_present(std::unique_lock<std::mutex>& lock, std::condition_variable& changed,
                  const Map& data, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout, const char* op) {
  auto deadline = Deadline::after(timeout);
  bool ready =
      changed.wait_until(lock, deadline.at(), [&] { return sd::missing_keys(data, keys).empty(); });
  if (!ready)
    throw TimeoutError(sd::timeout_message(op, sd::missing_keys(data, keys), timeout, kWhere));
}

}  // namespace

void HashStore::set(const std::string& key, std::string_view value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_.insert_or_assign(key, std::string(value));
  }
  changed_.notify_all();
}

std::string HashStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_present(lock, changed_, data_, {key}, resolve(timeout), "get");
  return data_.find(key)->second;
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = sd::add_counter(data_, key, delta);
  }
  changed_.notify_all();
  return result;
}

std::string HashStore::compare_set(const std::string& key, std::string_view expected,
                                   std::string_view desired) {
  bool changed = false;
  std::string result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = sd::compare_set_in(data_, key, expected, desired, &changed);
  }
  if (changed) changed_.notify_all();
  return result;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return sd::missing_keys(data_, keys).empty();
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_present(lock, changed_, data_, keys, resolve(timeout), "wait");
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(data_.size());
}

std::vector<std::string> HashStore::multi_get(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_present(lock, changed_, data_, keys, resolve(timeout), "multi_get");
  return sd::values_of(data_, keys);
}

void HashStore::multi_set(const std::vector<std::string>& keys,
                          const std::vector<std::string>& values) {
  sd::check_multi_set_sizes(keys.size(), values.size(), "HashStore");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < keys.size(); ++i) data_.insert_or_assign(keys[i], values[i]);
  }
  changed_.notify_all();
}

}  // namespace lockstep
