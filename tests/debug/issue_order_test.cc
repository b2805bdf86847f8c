// Cross-group order (LOCKSTEP_DEBUG=DETAIL, src/debug/issue_order.h): the per-thread counts, the
// records' encoding, the comparison's message, and real jobs of processes: an inversion between
// two groups fails with the same named MismatchError on every rank whatever the message size,
// while correct programs with several groups (shared ranks, partial subgroups, one thread per
// group) run and give the closed form.
#include "debug/issue_order.h"

#include <gtest/gtest.h>

#include <thread>

#include "catalogue_harness.h"
#include "lockstep/group/init.h"

namespace lockstep::debug {
namespace {

using testing::contains;
using testing::catalogue::ChildJob;
using testing::catalogue::Env;

TEST(IssueOrder, CountsThisThreadsCollectivesOnGroupsSharingTwoRanks) {
  IssueOrder a("a", {0, 1, 2}), b("b", {2, 1}), c("c", {0, 3}), d("d", {0, 1, 2, 3});
  EXPECT_EQ(a.note(), (std::vector<PriorIssue>{{"b", 0}, {"d", 0}}))
      << "c shares only rank 0 with a: no two ranks could disagree on it";
  EXPECT_EQ(b.note(), (std::vector<PriorIssue>{{"a", 1}, {"d", 0}}));
  EXPECT_EQ(b.note(), (std::vector<PriorIssue>{{"a", 1}, {"d", 0}}));
  EXPECT_EQ(a.note(), (std::vector<PriorIssue>{{"b", 2}, {"d", 0}}));
  std::vector<PriorIssue> other_thread;
  std::thread([&] { other_thread = a.note(); }).join();
  EXPECT_EQ(other_thread, (std::vector<PriorIssue>{{"b", 0}, {"d", 0}}))
      << "counts are per thread: another thread has issued nothing on b";
}

TEST(IssueOrder, ADestroyedGroupIsNoLongerReportedAndNamesCanComeBack) {
  IssueOrder a("a", {0, 1});
  {
    IssueOrder b("b", {0, 1});
    b.note();
    EXPECT_EQ(a.note(), (std::vector<PriorIssue>{{"b", 1}}));
  }
  EXPECT_TRUE(a.note().empty());
  IssueOrder again("b", {0, 1});
  EXPECT_EQ(a.note(), (std::vector<PriorIssue>{{"b", 0}}))
      << "a new group under an old name starts from zero";
}

TEST(IssueOrder, RecordsRoundTripAndOtherBytesAreRejected) {
  std::vector<PriorIssue> prior{{"default", 7}, {"default/12", 0}, {"", 3}};
  EXPECT_EQ(decode_prior_issues(encode_prior_issues(prior)), prior);
  EXPECT_TRUE(decode_prior_issues(encode_prior_issues({})).empty());
  std::string bytes = encode_prior_issues(prior);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(decode_prior_issues(std::string_view(bytes).substr(0, cut)), Error) << cut;
  EXPECT_THROW(decode_prior_issues(bytes + "x"), Error);
  std::string huge = bytes;
  huge[0] = '\xff';  // claims far more entries than the bytes could hold
  EXPECT_THROW(decode_prior_issues(huge), Error);
}

TEST(OrderInversion, AgreeingCountsAndGroupsOnlySomeRanksReportPass) {
  std::vector<std::vector<PriorIssue>> all{{{"sub", 2}, {"x", 0}}, {{"sub", 2}}, {{"x", 0}}};
  EXPECT_FALSE(order_inversion("default", "all_reduce #4", all));
}

TEST(OrderInversion, NamesBothGroupsEachRanksCountAndTheFix) {
  std::vector<std::vector<PriorIssue>> all{{{"default/1", 0}}, {{"default/1", 1}}};
  auto text = order_inversion("default", "all_reduce #0", all);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text,
            "all_reduce #0 on group 'default': the ranks used their groups in different orders (a "
            "cross-group order inversion). Collectives issued by this thread before this call, on "
            "group 'default/1': rank 0 had issued 0, rank 1 had issued 1 (group ranks of "
            "'default'). Fix: issue the collectives of all groups in the same order on every "
            "rank, e.g. every rank calls group 'default' and group 'default/1' in the same "
            "sequence. Without LOCKSTEP_DEBUG=DETAIL such a program deadlocks whenever the ops "
            "are small enough to run on the caller's thread, until the timeout");
}

// ---- jobs of real processes ----

size_t count_from_env() {
  return std::stoul(std::getenv("ISSUE_ORDER_COUNT"));
}

std::shared_ptr<ProcessGroup> join() {
  return init_process_group({.backend = std::getenv("ISSUE_ORDER_BACKEND")});
}

// Rank 0 issues the world's all_reduce and then the subgroup's; rank 1 the reverse.
TEST(IssueOrderChild, DISABLED_Inversion) {
  auto world = join();
  auto sub = world->new_group({0, 1});
  std::vector<float> a(count_from_env(), 1.0f), b(count_from_env(), 2.0f);
  auto start = Clock::now();
  try {
    WorkPtr first, second;
    if (world->rank() == 0) {
      first = world->all_reduce(view(a));
      second = sub->all_reduce(view(b));
    } else {
      first = sub->all_reduce(view(b));
      second = world->all_reduce(view(a));
    }
    first->wait();
    second->wait();
    testing::catalogue::say(detail::concat("NO ERROR a=", a[0], " b=", b[0]));
  } catch (const Error& e) {
    testing::catalogue::report(e, start);
  }
}

// Correct use of several groups: the world (3 ranks), a subgroup {0, 1} that rank 2 is not in,
// and a duplicate of the world driven from its own thread on every rank.
TEST(IssueOrderChild, DISABLED_CorrectUse) {
  auto world = join();
  auto sub = world->new_group({0, 1});
  auto side = world->new_group({0, 1, 2});
  const float n = static_cast<float>(world->size());
  std::vector<float> s(count_from_env(), 1.0f);
  std::thread driver([&] {
    for (int i = 0; i < 5; ++i) side->all_reduce(view(s))->wait();
  });
  bool ok = true;
  for (int step = 0; step < 5; ++step) {
    std::vector<float> a(count_from_env(), 1.0f), b(count_from_env(), 1.0f);
    auto wa = world->all_reduce(view(a));
    WorkPtr wb = sub ? sub->all_reduce(view(b)) : nullptr;
    wa->wait();
    if (wb) wb->wait();
    ok = ok && a.front() == n && a.back() == n && (!sub || (b.front() == 2 && b.back() == 2));
  }
  driver.join();
  const float side_expected = n * n * n * n * n;  // five in-place sums of n ranks' values
  ok = ok && s.front() == side_expected && s.back() == side_expected;
  testing::catalogue::say(ok ? "CLOSED FORM OK" : "WRONG VALUES");
}

struct Case {
  std::string backend;
  size_t count;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << ", " << c.count << " floats";
}

class IssueOrderJobs : public ::testing::TestWithParam<Case> {
 protected:
  Env env(const std::string& debug, const std::string& timeout = "60") {
    return {{"ISSUE_ORDER_BACKEND", GetParam().backend},
            {"ISSUE_ORDER_COUNT", std::to_string(GetParam().count)},
            {"LOCKSTEP_DEBUG", debug},
            {"LOCKSTEP_TIMEOUT", timeout}};
  }
};

// The same error on every rank, small or large: inline or not no longer decides what happens.
TEST_P(IssueOrderJobs, UnderDetailAnInversionIsNamedOnEveryRankWhateverTheSize) {
  ChildJob job("IssueOrderChild.DISABLED_Inversion", 2, env("DETAIL"));
  for (int r = 0; r < 2; ++r) {
    auto result = job.wait(r);
    SCOPED_TRACE("rank " + std::to_string(r) + " output:\n" + result.output);
    EXPECT_TRUE(contains(result.output, "CAUGHT MismatchError"));
    EXPECT_TRUE(contains(result.output, "a cross-group order inversion"));
    EXPECT_TRUE(contains(result.output, "all_reduce #0 on group 'default"));
    EXPECT_TRUE(contains(result.output, "rank 0 had issued 0, rank 1 had issued 1") ||
                contains(result.output, "rank 0 had issued 1, rank 1 had issued 0"));
    long ms = testing::catalogue::caught_after_ms(result.output);
    EXPECT_GE(ms, 0);
    EXPECT_LT(ms, 20'000) << "far below the 60 s timeout: detected, not timed out";
  }
}

TEST_P(IssueOrderJobs, UnderDetailCorrectUseOfSeveralGroupsRunsAndGivesTheClosedForm) {
  ChildJob job("IssueOrderChild.DISABLED_CorrectUse", 3, env("DETAIL"));
  for (int r = 0; r < 3; ++r) {
    auto result = job.wait(r);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, "CLOSED FORM OK")) << "rank " << r << ":\n"
                                                           << result.output;
  }
}

INSTANTIATE_TEST_SUITE_P(SmallAndLarge, IssueOrderJobs,
                         ::testing::Values(Case{"shm", 16}, Case{"shm", 1 << 20}, Case{"tcp", 16},
                                           Case{"tcp", 1 << 20}),
                         [](const auto& info) {
                           return info.param.backend + "_" + std::to_string(info.param.count);
                         });

// Without DETAIL the rule still holds: small ops run on the caller's thread, so the inversion
// deadlocks until the deadline, which ends it with a TimeoutError rather than a hang.
TEST(IssueOrderWithoutDetail, ASmallInversionEndsAtTheDeadlineWithATimeoutError) {
  ChildJob job("IssueOrderChild.DISABLED_Inversion", 2,
               {{"ISSUE_ORDER_BACKEND", "shm"},
                {"ISSUE_ORDER_COUNT", "16"},
                {"LOCKSTEP_DEBUG", "OFF"},
                {"LOCKSTEP_TIMEOUT", "3"}});
  for (int r = 0; r < 2; ++r) {
    auto result = job.wait(r);
    EXPECT_TRUE(contains(result.output, "CAUGHT TimeoutError")) << result.output;
  }
}

}  // namespace
}  // namespace lockstep::debug
