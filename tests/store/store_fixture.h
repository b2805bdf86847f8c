// The fixture of the contract tests that every Store must pass: parameterised over the store
// kinds, each test gets a fresh, empty store.
#pragma once

#include <gtest/gtest.h>

#include "store_harness.h"

namespace lockstep::store_test {

class StoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override { harness_ = make_harness(GetParam()); }
  void TearDown() override { harness_.reset(); }
  Store& store() { return harness_->store(); }
  std::shared_ptr<Store> another_client() { return harness_->another_client(); }

  std::unique_ptr<StoreHarness> harness_;
};

inline const auto kAllStoreKinds =
    ::testing::Values(StoreKind::hash, StoreKind::prefix, StoreKind::file, StoreKind::tcp);

inline std::string store_param_name(const ::testing::TestParamInfo<StoreKind>& info) {
  return kind_name(info.param);
}

}  // namespace lockstep::store_test
