// The signatures `lockstep explain` knows: parsed from a data file that ships with the tool
// (data/explain_signatures.txt, installed to <prefix>/share/lockstep/), never compiled in. The
// file's header comment describes its format; docs/diagnostics.md describes the command.
#pragma once

#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::cli::explain {

// One regular expression of a signature, with a literal that every match must contain (empty
// when none could be derived), so that most log lines are rejected without running the regex.
struct Pattern {
  std::string text;     // as written in the file
  std::regex regex;     // ECMAScript, case-sensitive
  std::string literal;  // a substring of every match, or ""
};

struct Signature {
  std::string id;
  std::string title;
  int catalogue = 0;  // entry of the failure catalogue (1-12), 0 when none
  int priority = 50;  // 0-100: the most specific signatures have the highest
  std::vector<Pattern> patterns;
  std::vector<std::string> causes;  // most likely first
  std::vector<std::string> fixes;
  int line = 0;  // where the block starts in its file
};

struct SignatureSet {
  std::string source;  // the file the signatures came from
  std::vector<Signature> signatures;
};

// Parses the text of a signatures file. Throws ConfigError naming source:line for an unknown
// key, a bad regular expression, a duplicate id, or a block without match, cause or fix.
SignatureSet parse_signatures(std::string_view text, const std::string& source);

// Reads and parses a signatures file (ConfigError when it cannot be read).
SignatureSet load_signatures(const std::string& path);

// The signatures file to use: `override_path` when not empty, else LOCKSTEP_EXPLAIN_SIGNATURES
// when set, else the file shipped beside the executable (the install tree's
// <prefix>/share/lockstep/, then the build tree's share/lockstep/). Throws ConfigError listing
// the places it looked when none exists.
std::string find_signatures_file(const std::string& override_path);

// A literal that every match of `pattern` contains: the longest run of plain characters outside
// groups and classes, or "" when the whole pattern is an alternative ('|' outside groups) or has
// no such run.
std::string required_literal(std::string_view pattern);

}  // namespace lockstep::cli::explain
