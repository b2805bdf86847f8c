// The exact semantics of every Store operation, run against every store kind.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "store_fixture.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

using StoreSemantics = StoreTest;
using Keys = std::vector<std::string>;

TEST_P(StoreSemantics, GetReturnsWhatSetStored) {
  store().set("alpha", "one");
  EXPECT_EQ(store().get("alpha"), "one");
  store().set("alpha", "two");
  EXPECT_EQ(store().get("alpha"), "two");
}

TEST_P(StoreSemantics, ValuesAndKeysAreBinarySafe) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) % 251);
  std::string odd_key = std::string("k\0ey/with spaces", 16);
  store().set("bytes", every_byte);
  store().set("big", big);
  store().set("empty", "");
  store().set(odd_key, "x");
  EXPECT_EQ(store().get("bytes"), every_byte);
  EXPECT_EQ(store().get("big"), big);
  EXPECT_EQ(store().get("empty"), "");
  EXPECT_EQ(store().get(odd_key), "x");
  EXPECT_TRUE(store().check({"empty"}));
}

TEST_P(StoreSemantics, AddCountsFromZeroAndStoresDecimalText) {
  EXPECT_EQ(store().add("counter", 5), 5);
  EXPECT_EQ(store().add("counter", -7), -2);
  EXPECT_EQ(store().add("counter", 0), -2);
  EXPECT_EQ(store().get("counter"), "-2");
  store().set("preset", "41");
  EXPECT_EQ(store().add("preset", 1), 42);
  EXPECT_EQ(store().get("preset"), "42");
}

TEST_P(StoreSemantics, AddOnNonIntegerThrowsStoreErrorAndLeavesValue) {
  store().set("word", "abc");
  auto msg = message_of<StoreError>([&] { store().add("word", 1); });
  EXPECT_CONTAINS(msg, "word'");
  EXPECT_CONTAINS(msg, "abc");
  EXPECT_EQ(store().get("word"), "abc");
  store().set("nearly", "12x");
  msg = message_of<StoreError>([&] { store().add("nearly", 1); });
  EXPECT_CONTAINS(msg, "nearly'");
  EXPECT_CONTAINS(msg, "12x");
}

TEST_P(StoreSemantics, AddThatOverflowsThrowsStoreError) {
  std::string max = std::to_string(std::numeric_limits<int64_t>::max());
  store().set("max", max);
  auto msg = message_of<StoreError>([&] { store().add("max", 1); });
  EXPECT_CONTAINS(msg, "max' overflows: it holds " + max + " and delta is 1");
  EXPECT_EQ(store().get("max"), max);
  EXPECT_EQ(store().add("max", -1), std::numeric_limits<int64_t>::max() - 1);
}

TEST_P(StoreSemantics, CompareSetOnMissingKey) {
  // A missing key equals "", so expected "" creates it ...
  EXPECT_EQ(store().compare_set("fresh", "", "v1"), "v1");
  EXPECT_EQ(store().get("fresh"), "v1");
  // ... and any other expected value leaves it missing, returning "".
  EXPECT_EQ(store().compare_set("absent", "something", "v2"), "");
  EXPECT_FALSE(store().check({"absent"}));
}

TEST_P(StoreSemantics, CompareSetOnExistingKey) {
  store().set("k", "old");
  EXPECT_EQ(store().compare_set("k", "wrong", "new"), "old");
  EXPECT_EQ(store().get("k"), "old");
  EXPECT_EQ(store().compare_set("k", "old", "new"), "new");
  EXPECT_EQ(store().get("k"), "new");
  EXPECT_EQ(store().compare_set("k", "", "other"), "new");
  EXPECT_EQ(store().compare_set("k", "new", ""), "");
  EXPECT_TRUE(store().check({"k"}));  // set to "", still present
}

TEST_P(StoreSemantics, CheckReportsPresenceWithoutWaiting) {
  EXPECT_TRUE(store().check({}));
  auto t0 = Clock::now();
  EXPECT_FALSE(store().check({"a"}));
  EXPECT_LT(ms_since(t0), 1000);
  store().set("a", "1");
  EXPECT_TRUE(store().check({"a"}));
  EXPECT_FALSE(store().check({"a", "b"}));
  store().set("b", "2");
  EXPECT_TRUE(store().check({"a", "b"}));
}

TEST_P(StoreSemantics, DeleteKeyReportsWhetherItExisted) {
  store().set("doomed", "x");
  EXPECT_TRUE(store().delete_key("doomed"));
  EXPECT_FALSE(store().delete_key("doomed"));
  EXPECT_FALSE(store().check({"doomed"}));
  EXPECT_CONTAINS(message_of<TimeoutError>([&] { store().get("doomed", milliseconds(50)); }),
                  "doomed'");
  EXPECT_EQ(store().add("doomed", 3), 3);  // a deleted counter restarts from zero
}

TEST_P(StoreSemantics, NumKeysCountsEveryKey) {
  EXPECT_EQ(store().num_keys(), 0);
  store().set("a", "1");
  store().set("b", "2");
  store().add("c", 1);
  store().multi_set({"d", "e"}, {"4", "5"});
  EXPECT_EQ(store().num_keys(), 5);
  store().set("a", "again");
  EXPECT_EQ(store().num_keys(), 5);
  store().delete_key("b");
  EXPECT_EQ(store().num_keys(), 4);
}

TEST_P(StoreSemantics, MultiGetReturnsValuesInKeyOrder) {
  store().multi_set({"b", "a", "c"}, {"2", "1", "3"});
  EXPECT_EQ(store().multi_get({"c", "a", "b"}), (Keys{"3", "1", "2"}));
  EXPECT_EQ(store().multi_get({"a", "a"}), (Keys{"1", "1"}));
  EXPECT_EQ(store().multi_get({}), Keys{});
  EXPECT_EQ(store().get("c"), "3");
}

TEST_P(StoreSemantics, MultiSetRejectsMismatchedSizesAndSetsNothing) {
  auto msg = message_of<InvalidArgument>([&] { store().multi_set({"x", "y"}, {"1"}); });
  EXPECT_CONTAINS(msg, "2 keys but 1 values");
  EXPECT_EQ(store().num_keys(), 0);
}

TEST_P(StoreSemantics, MultiSetLaterValueOfRepeatedKeyWins) {
  store().multi_set({"dup", "dup"}, {"first", "second"});
  EXPECT_EQ(store().get("dup"), "second");
  EXPECT_EQ(store().num_keys(), 1);
}

TEST_P(StoreSemantics, GetTimesOutNamingTheKey) {
  auto t0 = Clock::now();
  auto msg = message_of<TimeoutError>([&] { store().get("missing-key", milliseconds(200)); });
  auto elapsed = ms_since(t0);
  EXPECT_GE(elapsed, 190);
  EXPECT_LT(elapsed, 200 + 2000);
  EXPECT_CONTAINS(msg, "missing-key'");
  EXPECT_CONTAINS(msg, "200 ms");
}

TEST_P(StoreSemantics, DefaultTimeoutIsTheStoresTimeout) {
  store().set_timeout(milliseconds(150));
  auto t0 = Clock::now();
  auto msg = message_of<TimeoutError>([&] { store().get("nobody"); });
  auto elapsed = ms_since(t0);
  store().set_timeout(milliseconds(30'000));
  EXPECT_GE(elapsed, 140);
  EXPECT_LT(elapsed, 150 + 2000);
  EXPECT_CONTAINS(msg, "nobody'");
}

TEST_P(StoreSemantics, WaitTimesOutNamingOnlyTheMissingKeys) {
  store().set("present", "1");
  auto t0 = Clock::now();
  auto msg = message_of<TimeoutError>([&] {
    store().wait({"present", "absent"}, milliseconds(200));
  });
  EXPECT_GE(ms_since(t0), 190);
  EXPECT_CONTAINS(msg, "absent'");
  EXPECT_NOT_CONTAINS(msg, "present'");
}

TEST_P(StoreSemantics, MultiGetTimesOutNamingTheMissingKey) {
  store().set("have", "1");
  auto msg = message_of<TimeoutError>([&] {
    store().multi_get({"have", "lack"}, milliseconds(100));
  });
  EXPECT_CONTAINS(msg, "lack'");
  EXPECT_NOT_CONTAINS(msg, "have'");
}

TEST_P(StoreSemantics, ZeroTimeoutOnPresentKeySucceedsAndOnMissingKeyFails) {
  store().set("here", "v");
  EXPECT_EQ(store().get("here", milliseconds(0)), "v");
  store().wait({"here"}, milliseconds(0));
  EXPECT_CONTAINS(message_of<TimeoutError>([&] { store().get("gone", milliseconds(0)); }), "gone'");
}

TEST_P(StoreSemantics, StoreStaysUsableAfterATimeout) {
  EXPECT_CONTAINS(message_of<TimeoutError>([&] { store().get("late", milliseconds(50)); }),
                  "late'");
  store().set("late", "arrived");
  EXPECT_EQ(store().get("late"), "arrived");
  EXPECT_EQ(store().add("n", 2), 2);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreSemantics, kAllStoreKinds, store_param_name);

}  // namespace
}  // namespace lockstep::store_test
