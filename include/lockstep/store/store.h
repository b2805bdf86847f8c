// Store: a small key-value service that ranks use to find each other (rendezvous) and to exchange
// setup data. Values are binary-safe strings.
//
// Thread-safety: every Store implementation is safe to call from several threads at once.
// Blocking: every call that can wait takes a timeout; kDefaultTimeout means the store's own
// timeout (timeout()). A call that runs out of time throws TimeoutError naming the keys it waited
// for. A lost connection throws NetworkError; any other failure StoreError.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class Store {
 public:
  // Pass as a timeout argument to mean "this store's timeout()".
  static constexpr std::chrono::milliseconds kDefaultTimeout{-1};

  virtual ~Store() = default;

  // Sets key to value, replacing any earlier value, and wakes every waiter on key.
  virtual void set(const std::string& key, std::string_view value) = 0;
  // Returns key's value, waiting up to timeout for the key to be set.
  virtual std::string get(const std::string& key,
                          std::chrono::milliseconds timeout = kDefaultTimeout) = 0;
  // Atomically adds delta to the integer stored at key (a missing key counts as 0) and returns the
  // new value. The value is stored as decimal text, so get() on it returns e.g. "3". Throws
  // StoreError if key holds something that is not an integer.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Atomically: if key's value equals expected (a missing key equals ""), sets it to desired.
  // Returns key's value after the call ("" when the key is still missing).
  virtual std::string compare_set(const std::string& key, std::string_view expected,
                                  std::string_view desired) = 0;
  // Whether every key exists now. Never waits.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists, up to timeout. The TimeoutError names the missing keys.
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout = kDefaultTimeout) = 0;
  // Removes key; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  // Number of keys in the store (for a PrefixStore: in the whole underlying store).
  virtual int64_t num_keys() = 0;
  // get() of several keys, waiting up to timeout for all of them. Values in key order.
  virtual std::vector<std::string> multi_get(
      const std::vector<std::string>& keys,
      std::chrono::milliseconds timeout = kDefaultTimeout) = 0;
  // set() of several keys, atomically with respect to other callers. Sizes must match
  // (InvalidArgument otherwise).
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::string>& values) = 0;

  // The default timeout of blocking calls.
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load());
  }
  void set_timeout(std::chrono::milliseconds t) { timeout_ms_.store(t.count()); }

 protected:
  std::chrono::milliseconds resolve(std::chrono::milliseconds t) const {
    return t.count() < 0 ? timeout() : t;
  }

 private:
  std::atomic<int64_t> timeout_ms_{300'000};
};

}  // namespace lockstep
