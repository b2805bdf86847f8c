// C10dStore: the c10d::Store that torch.distributed hands a backend's creator function (a
// PrefixStore over the job's TCPStore, FileStore or HashStore), seen as a lockstep::Store, so that
// a lockstep ProcessGroup can rendezvous through it.
//
// [Deadlines] c10d's get() waits with the store's own timeout; lockstep's calls carry their own.
// Every waiting call here first waits for its keys with the call's deadline (c10d's
// wait(keys, timeout)), then reads them. A c10d timeout becomes TimeoutError naming the keys, any
// other c10d failure NetworkError (the store's connection) with c10d's message.
//
// multi_set() sets the keys one by one: c10d has no atomic multi-set. lockstep uses it only for
// keys that nobody reads until all are set.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "lockstep/store/store.h"

namespace lockstep::c10d_backend {

class C10dStore : public Store {
 public:
  C10dStore(c10::intrusive_ptr<::c10d::Store> store, std::chrono::milliseconds timeout);

  void set(const std::string& key, std::string_view value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, std::string_view expected,
                          std::string_view desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

 private:
  c10::intrusive_ptr<::c10d::Store> store_;
};

}  // namespace lockstep::c10d_backend
