// The signatures file of `lockstep explain` as a unit (src/cli/explain_signatures.h, compiled into
// this test): the literal each pattern's matches must contain, which scan_log uses to skip lines
// without running the regex, and the patterns std::regex cannot be trusted with.
#include "cli/explain_signatures.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/explain_match.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::cli::explain {
namespace {

using testing::expect_error_naming;

SignatureSet one_signature(const std::string& match) {
  return parse_signatures("signature: s\ntitle: t\nmatch: " + match + "\ncause: c\nfix: f\n",
                          "test.txt");
}

size_t lines_found(const std::string& match, const std::string& log) {
  const SignatureSet set = one_signature(match);
  std::istringstream in(log);
  const LogScan scan = scan_log(in, set);
  return scan.findings.empty() ? 0 : scan.findings[0].line_count;
}

TEST(ExplainSignatures, RequiredLiteralIsTheLongestPlainRun) {
  EXPECT_EQ(required_literal(R"(rank \d+ sent \d+ bytes)"), " sent ");  // the first of the longest
  EXPECT_EQ(required_literal(R"(Connection refused)"), "Connection refused");
  EXPECT_EQ(required_literal(R"(a\.b(c|d)*e)"), "a.b");
  EXPECT_EQ(required_literal(R"(one|two)"), "");
}

// Found by fuzz/explain_signatures_fuzz.cc: the hex digits of \x41 and \u0042 (and the letter of
// \cJ) counted as plain characters of the literal, so a line holding "A" was skipped before its
// regex ran, and `lockstep explain` missed it.
TEST(ExplainSignatures, EscapesWithOperandsAreNotPartOfTheLiteral) {
  EXPECT_EQ(required_literal(R"(\x41BCD)"), "BCD");
  EXPECT_EQ(required_literal(R"(\u0042yte)"), "yte");
  EXPECT_EQ(required_literal(R"(xy\cJ)"), "xy");
  EXPECT_EQ(required_literal(R"((ab)cd\12)"), "cd");
  EXPECT_EQ(lines_found(R"(a\.b(c|d)*e[^Wx]+\x41{2,3}\u0042)", "a.bcdeyAAB\n"), 1u);
  EXPECT_EQ(lines_found(R"(port \x41)", "port A\nport 41\n"), 1u);
}

// Found by fuzz/explain_signatures_fuzz.cc: a ']' right after '[' or "[^" was read as a member of
// the class (the POSIX rule), but in ECMAScript it closes it; the class then swallowed the rest
// of the pattern with its top-level '|', and the literal of one alternative was required of all.
TEST(ExplainSignatures, AClassClosesAtItsFirstBracket) {
  EXPECT_EQ(required_literal(R"(a\.b[^]d+ sen| \i+ byte|s)"), "");
  EXPECT_EQ(lines_found(R"(a\.b(c|d)*e[^]d+ sen| \i+ byte|s)", "cause: c\n"), 1u);
  EXPECT_EQ(required_literal(R"(x[]]yz)"), "]yz");
}

// Found by fuzz/explain_signatures_fuzz.cc (UBSan): std::regex (libstdc++) reads the number of a
// back-reference or a repeat count into a long without checking for overflow.
TEST(ExplainSignatures, HugeRepeatCountsAndBackReferencesAreAConfigError) {
  expect_error_naming<ConfigError>([] { one_signature(R"(a\55555555555555555555555555.b)"); },
                                   {"test.txt:3: signature 's'",
                                    "holds the repeat count or back-reference "
                                    "55555555555555555555555555; at most 1000 is supported"});
  expect_error_naming<ConfigError>([] { one_signature(R"(x{2,5555555555555555555})"); },
                                   {"back-reference 5555555555555555555"});
  expect_error_naming<ConfigError>([] { one_signature(R"(x{1001})"); }, {"1001"});
  EXPECT_NO_THROW(one_signature(R"(x{2,1000} port [{99999999999999999999}] 5555555555555555)"));
}

}  // namespace
}  // namespace lockstep::cli::explain
