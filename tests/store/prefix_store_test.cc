// PrefixStore specifics: keys land under "<prefix>/" in the base, prefixes do not see each
// other's keys, and num_keys counts the whole base.
#include "lockstep/store/prefix_store.h"
#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

TEST(PrefixStore, KeysLiveUnderThePrefixInTheBase) {
  auto base = std::make_shared<HashStore>();
  PrefixStore group("pg1", base);
  group.set("rank0", "addr");
  EXPECT_EQ(base->get("pg1/rank0", milliseconds(0)), "addr");
  EXPECT_FALSE(base->check({"rank0"}));
  group.multi_set({"a", "b"}, {"1", "2"});
  EXPECT_EQ(base->multi_get({"pg1/a", "pg1/b"}, milliseconds(0)),
            (std::vector<std::string>{"1", "2"}));
  group.add("n", 4);
  EXPECT_EQ(base->get("pg1/n", milliseconds(0)), "4");
  EXPECT_TRUE(group.delete_key("a"));
  EXPECT_FALSE(base->check({"pg1/a"}));
}

TEST(PrefixStore, PrefixesAreIsolatedAndNumKeysCountsTheBase) {
  auto base = std::make_shared<HashStore>();
  PrefixStore one("one", base);
  PrefixStore two("two", base);
  one.set("k", "1");
  EXPECT_FALSE(two.check({"k"}));
  EXPECT_EQ(two.compare_set("k", "", "2"), "2");
  EXPECT_EQ(one.get("k", milliseconds(0)), "1");
  base->set("unprefixed", "x");
  EXPECT_EQ(one.num_keys(), 3);
  EXPECT_EQ(two.num_keys(), 3);
}

TEST(PrefixStore, NestedPrefixesCompose) {
  auto base = std::make_shared<HashStore>();
  auto outer = std::make_shared<PrefixStore>("outer", base);
  PrefixStore inner("inner", outer);
  inner.set("k", "v");
  EXPECT_EQ(base->get("outer/inner/k", milliseconds(0)), "v");
}

TEST(PrefixStore, TimeoutStartsAsTheBasesAndTimeoutsNameTheKey) {
  auto base = std::make_shared<HashStore>();
  base->set_timeout(milliseconds(120));
  PrefixStore group("g", base);
  EXPECT_EQ(group.timeout(), milliseconds(120));
  auto t0 = Clock::now();
  Store& as_store = group;  // the default timeout argument is declared on Store
  auto msg = message_of<TimeoutError>([&] { as_store.get("missing"); });
  EXPECT_GE(ms_since(t0), 110);
  EXPECT_CONTAINS(msg, "g/missing");
}

TEST(PrefixStore, NullBaseIsRejected) {
  EXPECT_CONTAINS(message_of<InvalidArgument>([] { PrefixStore("p", nullptr); }),
                  "PrefixStore(\"p\") needs a base store, got nullptr");
}

}  // namespace
}  // namespace lockstep::store_test
