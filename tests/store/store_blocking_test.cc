// Blocking calls and concurrency, run against every store kind: calls satisfied by other clients,
// many clients at once, and atomicity of add and multi_set.
#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "lockstep/core/error.h"
#include "store_fixture.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

using StoreBlocking = StoreTest;

TEST_P(StoreBlocking, GetIsSatisfiedByAnotherClientsSet) {
  auto other = another_client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    other->set("late", "value");
  });
  auto t0 = Clock::now();
  EXPECT_EQ(store().get("late", milliseconds(10'000)), "value");
  EXPECT_GE(ms_since(t0), 80);
  EXPECT_LT(ms_since(t0), 5000);
  setter.join();
}

TEST_P(StoreBlocking, WaitReturnsOnceEveryKeyExists) {
  auto other = another_client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    other->set("first", "1");
    std::this_thread::sleep_for(milliseconds(50));
    other->add("second", 1);
  });
  store().wait({"first", "second"}, milliseconds(10'000));
  EXPECT_TRUE(store().check({"first", "second"}));
  setter.join();
}

TEST_P(StoreBlocking, MultiGetWaitsForKeysSetLater) {
  auto other = another_client();
  store().set("x", "early");
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(80));
    other->multi_set({"y", "z"}, {"late-y", "late-z"});
  });
  auto values = store().multi_get({"x", "y", "z"}, milliseconds(10'000));
  EXPECT_EQ(values, (std::vector<std::string>{"early", "late-y", "late-z"}));
  setter.join();
}

// A key deleted after the waiter saw it must be waited for again.
TEST_P(StoreBlocking, WaitSeesKeysThatExistAtTheSameTime) {
  auto other = another_client();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    other->set("a", "1");
    other->delete_key("a");
    std::this_thread::sleep_for(milliseconds(50));
    other->set("b", "2");
  });
  auto msg = message_of<TimeoutError>([&] { store().wait({"a", "b"}, milliseconds(400)); });
  EXPECT_CONTAINS(msg, "a'");
  EXPECT_NOT_CONTAINS(msg, "b'");
  setter.join();
}

TEST_P(StoreBlocking, BlockedGetDoesNotDelayOtherClients) {
  auto waiter = another_client();
  std::thread blocked([&] { EXPECT_EQ(waiter->get("slow", milliseconds(20'000)), "done"); });
  std::this_thread::sleep_for(milliseconds(50));
  auto t0 = Clock::now();
  for (int i = 0; i < 50; ++i) store().set("busy" + std::to_string(i), "x");
  EXPECT_EQ(store().get("busy49"), "x");
  EXPECT_LT(ms_since(t0), 5000);
  store().set("slow", "done");
  blocked.join();
}

TEST_P(StoreBlocking, ManyBlockedGetsAreAllAnswered) {
  constexpr int kClients = 16;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(another_client());
  std::vector<std::string> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back(
        [&, i] { got[i] = clients[i]->get("key" + std::to_string(i), milliseconds(20'000)); });
  std::this_thread::sleep_for(milliseconds(50));
  for (int i = kClients - 1; i >= 0; --i) store().set("key" + std::to_string(i), std::to_string(i));
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[i], std::to_string(i));
}

// 16 clients each add 1 to one counter 500 times: the total is exact, and since each add is
// atomic, the values returned across all clients are exactly 1..8000, each once.
TEST_P(StoreBlocking, ConcurrentAddsAreAtomic) {
  constexpr int kClients = 16;
  constexpr int kAdds = 500;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(another_client());
  std::vector<std::vector<int64_t>> returned(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      for (int n = 0; n < kAdds; ++n) returned[i].push_back(clients[i]->add("counter", 1));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(store().get("counter"), std::to_string(kClients * kAdds));
  std::vector<int64_t> all;
  for (auto& r : returned) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kClients * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
}

// Only one of several racing compare_set("", mine) calls wins, and every caller learns the winner.
TEST_P(StoreBlocking, CompareSetElectsExactlyOneWinner) {
  constexpr int kClients = 8;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(another_client());
  std::vector<std::string> seen(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back(
        [&, i] { seen[i] = clients[i]->compare_set("leader", "", "rank" + std::to_string(i)); });
  for (auto& t : threads) t.join();
  std::string winner = store().get("leader");
  for (const auto& s : seen) EXPECT_EQ(s, winner);
  EXPECT_EQ(winner.rfind("rank", 0), 0u);
}

// A reader never sees half of a multi_set: the two keys always hold the same number.
TEST_P(StoreBlocking, MultiSetIsAtomicForReaders) {
  auto writer = another_client();
  store().multi_set({"left", "right"}, {"0", "0"});
  std::atomic<bool> done{false};
  std::thread writing([&] {
    for (int i = 1; i <= 300; ++i)
      writer->multi_set({"left", "right"}, {std::to_string(i), std::to_string(i)});
    done = true;
  });
  int reads = 0;
  while (!done || reads < 10) {
    auto v = store().multi_get({"left", "right"});
    ++reads;
    if (v[0] != v[1]) {
      ADD_FAILURE() << "torn multi_set seen after " << reads << " reads: " << v[0] << " vs "
                    << v[1];
      break;
    }
  }
  writing.join();
  EXPECT_EQ(store().get("left"), "300");
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreBlocking, kAllStoreKinds, store_param_name);

}  // namespace
}  // namespace lockstep::store_test
