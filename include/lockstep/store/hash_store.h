// HashStore: an in-process Store, for ranks that are threads of one process (tests, benchmarks).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "lockstep/store/store.h"

namespace lockstep {

class HashStore : public Store {
 public:
  HashStore() = default;
  void set(const std::string& key, std::string_view value) override;
  std::string get(const std::string& key,
                  std::chrono::milliseconds timeout = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, std::string_view expected,
                          std::string_view desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kDefaultTimeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout = kDefaultTimeout) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> data_;
};

}  // namespace lockstep
