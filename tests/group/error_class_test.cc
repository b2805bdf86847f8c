// Errors keep their class on the way from a backend to the caller, and argument problems a backend
// can see are raised on the caller's thread, leaving the group usable.
#include <gtest/gtest.h>

#include <string>
#include <typeinfo>
#include <vector>

#include "comm/backend.h"
#include "group/backend_registry.h"
#include "group/progress_queue.h"
#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

// A backend whose first run() throws `first`; it counts the ops it ran and records its abort.
class FailingBackend final : public Backend {
 public:
  explicit FailingBackend(std::exception_ptr first) : first_(std::move(first)) {}
  const std::string& name() const override { return name_; }
  void run(const Op& /*op*/) override {
    ++runs;
    if (runs == 1) std::rethrow_exception(first_);
  }
  void abort(const std::string& reason) override { aborts.push_back(reason); }
  void shutdown(Deadline /*deadline*/) override {}

  int runs = 0;
  std::vector<std::string> aborts;

 private:
  const std::string name_ = "failing";
  std::exception_ptr first_;
};

template <class E>
std::exception_ptr error(const std::string& what) {
  return std::make_exception_ptr(E(what));
}

// What wait() throws: its dynamic type's name and message.
std::pair<std::string, std::string> outcome(const WorkPtr& work) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    return {typeid(e).name(), e.what()};
  }
  return {"", ""};
}

TEST(ProgressQueueErrors, EveryErrorClassReachesTheCallerAndTheOpsAfterIt) {
  const std::vector<std::pair<std::exception_ptr, const char*>> cases = {
      {error<NetworkError>("cause"), typeid(NetworkError).name()},
      {error<MismatchError>("cause"), typeid(MismatchError).name()},
      {error<TimeoutError>("cause"), typeid(TimeoutError).name()},
      {error<StoreError>("cause"), typeid(StoreError).name()},
      {error<InvalidArgument>("cause"), typeid(InvalidArgument).name()},
      {error<ConfigError>("cause"), typeid(ConfigError).name()},
      {error<Error>("cause"), typeid(Error).name()},
  };
  for (const auto& [first, type] : cases) {
    FailingBackend backend(first);
    {
      ProgressQueue queue(backend);
      WorkPtr failed = queue.push({.kind = OpKind::all_reduce, .seq = 0});
      WorkPtr later = queue.push({.kind = OpKind::broadcast, .seq = 1});
      auto [t1, m1] = outcome(failed);
      EXPECT_EQ(t1, type);
      EXPECT_EQ(m1, "cause");
      auto [t2, m2] = outcome(later);
      EXPECT_EQ(t2, type) << "the op after the failure";
      EXPECT_EQ(m2, "broadcast #1: not run, because the group broke at all_reduce #0: cause");
      EXPECT_TRUE(queue.broken());
    }
    EXPECT_EQ(backend.runs, 1) << "ops after the failure never reach the backend";
    EXPECT_EQ(backend.aborts, std::vector<std::string>{"cause"}) << "the peers are told once";
  }
}

// A forced algorithm that the op does not offer: InvalidArgument from the call itself, on the one
// rank that makes the mistake, without taking a sequence number; then the group works on.
class BackendArgumentErrors : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendArgumentErrors, AreRaisedByTheCallAndLeaveTheGroupUsable) {
  spawn_groups(
      3,
      [](ProcessGroup& pg) {
        std::vector<float> x(10, static_cast<float>(pg.rank()));
        if (pg.rank() == 1) {
          expect_error_naming<InvalidArgument>(
              [&] { (void)pg.all_reduce(view(x), {.algorithm = Algorithm::tree}); },
              {"all_reduce #0: all_reduce runs ring, recursive_doubling or automatic, not tree"});
          expect_error_naming<InvalidArgument>(
              [&] { (void)pg.broadcast(view(x), {.algorithm = Algorithm::ring}); },
              {"broadcast #0: broadcast runs tree, chain or automatic, not ring"});
        }
        WorkPtr work = pg.all_reduce(view(x));
        EXPECT_EQ(work->description().rfind("all_reduce #0 ", 0), 0u) << work->description();
        work->wait();
        for (float v : x) EXPECT_EQ(v, 0.0f + 1.0f + 2.0f);
      },
      GetParam());
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, BackendArgumentErrors, ::testing::ValuesIn(backend_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lockstep::testing
