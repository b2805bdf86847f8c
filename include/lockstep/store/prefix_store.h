// PrefixStore: a view of another store in which every key gets "<prefix>/" in front, so that
// groups and subsystems sharing one store never collide.
#pragma once

#include <memory>

#include "lockstep/store/store.h"

namespace lockstep {

class PrefixStore : public Store {
 public:
  // Shares ownership of base. The timeout starts as base's.
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
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

  const std::shared_ptr<Store>& base() const { return base_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace lockstep
