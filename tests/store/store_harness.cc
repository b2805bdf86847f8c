#include "store_harness.h"

#include <filesystem>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/store/file_store.h"
#include "lockstep/store/hash_store.h"
#include "lockstep/store/prefix_store.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::store_test {

namespace {

constexpr milliseconds kTimeout{30'000};

class HashHarness : public StoreHarness {
 public:
  HashHarness() {
    primary_ = std::make_shared<HashStore>();
    primary_->set_timeout(kTimeout);
  }
  std::shared_ptr<Store> another_client() override { return primary_; }
};

class PrefixHarness : public StoreHarness {
 public:
  PrefixHarness() : base_(std::make_shared<HashStore>()) {
    base_->set_timeout(kTimeout);
    primary_ = another_client();
  }
  std::shared_ptr<Store> another_client() override {
    return std::make_shared<PrefixStore>("group0", base_);
  }

 private:
  std::shared_ptr<HashStore> base_;
};

class FileHarness : public StoreHarness {
 public:
  FileHarness() { primary_ = another_client(); }
  ~FileHarness() override { primary_.reset(); }
  std::shared_ptr<Store> another_client() override {
    return std::make_shared<FileStore>(
        FileStoreOptions{.path = dir_.file("store"), .world_size = -1, .timeout = kTimeout});
  }

 private:
  TempDir dir_;  // outlives primary_ (reset first)
};

class TcpHarness : public StoreHarness {
 public:
  TcpHarness() : server_({.bind_host = "127.0.0.1", .port = 0}) { primary_ = another_client(); }
  ~TcpHarness() override { primary_.reset(); }
  std::shared_ptr<Store> another_client() override {
    return std::make_shared<TcpStore>(
        TcpStoreOptions{.host = "127.0.0.1", .port = server_.port(), .timeout = kTimeout});
  }

 private:
  TcpStoreServer server_;
};

}  // namespace

std::unique_ptr<StoreHarness> make_harness(StoreKind kind) {
  switch (kind) {
    case StoreKind::hash:
      return std::make_unique<HashHarness>();
    case StoreKind::prefix:
      return std::make_unique<PrefixHarness>();
    case StoreKind::file:
      return std::make_unique<FileHarness>();
    case StoreKind::tcp:
      return std::make_unique<TcpHarness>();
  }
  throw InvalidArgument("unknown store kind");
}

std::string kind_name(StoreKind kind) {
  constexpr const char* kNames[] = {"HashStore", "PrefixStore", "FileStore", "TcpStore"};
  return kNames[static_cast<int>(kind)];
}

}  // namespace lockstep::store_test
