// The failure module: every error class survives being raised again (after crossing a thread or a
// process), a peer narrows the classes it did not cause to NetworkError, and a first failure
// repeats its class and cause to every later op.
#include "comm/failure.h"

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>

#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"

namespace lockstep::testing {
namespace {

// One exception of each lockstep type, with the class it must map to.
struct Case {
  ErrorClass error_class;
  std::exception_ptr error;
  const std::type_info& type;
};

template <class E>
Case make(ErrorClass c) {
  return {c, std::make_exception_ptr(E("original")), typeid(E)};
}

std::vector<Case> every_class() {
  return {make<Error>(ErrorClass::other),
          make<NetworkError>(ErrorClass::network),
          make<MismatchError>(ErrorClass::mismatch),
          make<TimeoutError>(ErrorClass::timeout),
          make<StoreError>(ErrorClass::store),
          make<InvalidArgument>(ErrorClass::invalid_argument),
          make<ConfigError>(ErrorClass::config)};
}

// The dynamic type and message of what fn throws.
template <class F>
std::pair<std::string, std::string> thrown(F fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return {typeid(e).name(), e.what()};
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

TEST(Failure, EveryClassIsRecognisedAndRaisedAgainWithItsOwnType) {
  for (const Case& c : every_class()) {
    EXPECT_EQ(error_class_of(c.error), c.error_class) << c.type.name();
    auto [type, what] = thrown([&] { throw_as(c.error_class, "again"); });
    EXPECT_EQ(type, c.type.name());
    EXPECT_EQ(what, "again");
    auto [type2, what2] = thrown([&] { rethrow_as(c.error, "with context"); });
    EXPECT_EQ(type2, c.type.name());
    EXPECT_EQ(what2, "with context");
    EXPECT_EQ(what_of(c.error), "original");
  }
}

TEST(Failure, ForeignExceptionsAreClassOther) {
  EXPECT_EQ(error_class_of(std::make_exception_ptr(std::runtime_error("x"))), ErrorClass::other);
  EXPECT_EQ(error_class_of(std::make_exception_ptr(42)), ErrorClass::other);
  EXPECT_EQ(what_of(std::make_exception_ptr(42)), "unknown error");
  // Raised again as lockstep's base class, never as something more specific.
  auto [type, what] = thrown([] { rethrow_as(std::make_exception_ptr(42), "m"); });
  EXPECT_EQ(type, typeid(Error).name());
}

TEST(Failure, PeersSeeTheirOwnClassesAsNetworkErrors) {
  // A mismatch or a timeout is the peers' problem too; anything else means this rank went away.
  EXPECT_EQ(peer_class(ErrorClass::mismatch), ErrorClass::mismatch);
  EXPECT_EQ(peer_class(ErrorClass::timeout), ErrorClass::timeout);
  for (ErrorClass c : {ErrorClass::other, ErrorClass::network, ErrorClass::store,
                       ErrorClass::invalid_argument, ErrorClass::config})
    EXPECT_EQ(peer_class(c), ErrorClass::network);
  // A byte off the wire that is no class at all.
  EXPECT_EQ(peer_class(static_cast<ErrorClass>(200)), ErrorClass::network);
}

TEST(Failure, FirstFailureRepeatsItsClassAndCauseToLaterOps) {
  for (const Case& c : every_class()) {
    FirstFailure f;
    const Op op{.kind = OpKind::all_reduce, .seq = 7};
    EXPECT_NO_THROW(f.throw_if_happened(op));
    EXPECT_TRUE(f.record(c.error_class, "the cause"));
    EXPECT_FALSE(f.record(ErrorClass::timeout, "a later failure"));
    auto [type, what] = thrown([&] { f.throw_if_happened(op); });
    EXPECT_EQ(type, c.type.name());
    EXPECT_EQ(what, "all_reduce #7: the group is broken: the cause");
  }
}

TEST(Failure, TheFirstAbortNoteWins) {
  HashStore store;
  EXPECT_EQ(read_abort_note(store, "g", std::chrono::milliseconds(10)), std::nullopt);
  write_abort_note(store, "g", 2, "host-a", "first");
  write_abort_note(store, "g", 0, "host-b", "second");
  EXPECT_EQ(read_abort_note(store, "g", std::chrono::milliseconds(10)),
            "rank 2 (host host-a): first");
  EXPECT_EQ(read_abort_note(store, "other", std::chrono::milliseconds(10)), std::nullopt);
}

}  // namespace
}  // namespace lockstep::testing
