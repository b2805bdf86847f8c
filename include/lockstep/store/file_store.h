// FileStore: a Store kept in one file, for ranks that share a filesystem but no network path to
// a store server. Every operation takes an flock(2) on the file; blocking reads poll the file.
// The file is removed by the last of `world_size` FileStore objects to be destroyed (when
// world_size > 0), so a finished job leaves nothing behind.
#pragma once

#include <mutex>

#include "lockstep/store/store.h"

namespace lockstep {

struct FileStoreOptions {
  std::string path;     // the shared file; created if missing
  int world_size = -1;  // number of users that will open it; -1: never remove the file
  std::chrono::milliseconds timeout{300'000};
};

class FileStore : public Store {
 public:
  explicit FileStore(const FileStoreOptions& options);
  ~FileStore() override;
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
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
