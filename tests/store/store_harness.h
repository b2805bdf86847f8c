// StoreHarness: one fresh, empty store of each kind for the shared contract tests, and a way to
// get further handles on the same store, as separate processes would hold them.
#pragma once

#include <memory>
#include <string>

#include "lockstep/store/store.h"
#include "support/temp_dir.h"

namespace lockstep::store_test {

enum class StoreKind { hash, prefix, file, tcp };

class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  // The store under test (default timeout 30 s).
  Store& store() { return *primary_; }
  // Another handle on the same store: a new TcpStore client, a new FileStore object on the same
  // file, a new PrefixStore over the same base; the same object for HashStore.
  virtual std::shared_ptr<Store> another_client() = 0;

 protected:
  std::shared_ptr<Store> primary_;
};

std::unique_ptr<StoreHarness> make_harness(StoreKind kind);
std::string kind_name(StoreKind kind);

using lockstep::testing::TempDir;

}  // namespace lockstep::store_test
