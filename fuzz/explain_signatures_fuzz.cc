// The signatures file of `lockstep explain` (src/cli/explain_signatures.h): parse_signatures,
// which reads the blocks, compiles every `match:` regular expression and derives the literal each
// match must contain (required_literal), which scan_log uses to skip lines without running the
// regex.
//
// Input: the file's text, optionally followed by a NUL byte and a few log lines. Checked: a bad
// file is a ConfigError, and a pattern's literal really is in every short log line its regex
// matches (else `lockstep explain` would miss that line).
#include <algorithm>
#include <regex>

#include "cli/explain_signatures.h"
#include "fuzz_input.h"
#include "lockstep/core/error.h"

using namespace lockstep;

namespace {

// std::regex backtracks: nested quantifiers ("b*****", "(a+)+") take exponential time in the
// line's length, in `lockstep explain` as here. The literal check keeps to short lines and to
// patterns with few quantifiers, where that stays cheap; parsing has no such limit.
constexpr size_t kMaxLineBytes = 16;
constexpr size_t kMaxLines = 8;
constexpr size_t kMaxQuantifiers = 3;

bool cheap_to_match(const std::string& pattern) {
  return std::count_if(pattern.begin(), pattern.end(), [](char c) {
           return c == '*' || c == '+' || c == '?' || c == '{';
         }) <= static_cast<std::ptrdiff_t>(kMaxQuantifiers);
}

void check_literals(const cli::explain::SignatureSet& set, const std::string& log) {
  size_t lines = 0;
  for (const std::string& line : fuzz::split(log, '\n')) {
    if (line.size() > kMaxLineBytes) continue;
    if (++lines > kMaxLines) return;
    for (const auto& signature : set.signatures)
      for (const auto& pattern : signature.patterns)
        if (cheap_to_match(pattern.text) && std::regex_search(line, pattern.regex) &&
            line.find(pattern.literal) == std::string::npos)
          fuzz::broken(detail::concat("pattern '", pattern.text, "' matches '", line,
                                      "', which lacks its required literal '", pattern.literal,
                                      "'"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  try {
    const auto set = cli::explain::parse_signatures(text, "fuzz.txt");
    if (nul != std::string_view::npos) check_literals(set, std::string(input.substr(nul + 1)));
  } catch (const ConfigError&) {
  }
  return 0;
}
