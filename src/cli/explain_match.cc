#include "cli/explain_match.h"

#include <algorithm>

namespace lockstep::cli::explain {
namespace {

// Lines longer than this are searched and shown only up to here (std::regex is slow, and can
// recurse deeply, on very long lines; error messages fit easily).
constexpr size_t kMaxLineBytes = 4096;
constexpr size_t kShownLineBytes = 300;

bool matches(const Pattern& p, const std::string& line) {
  if (!p.literal.empty() && line.find(p.literal) == std::string::npos) return false;
  return std::regex_search(line, p.regex);
}

bool matches_any(const Signature& s, const std::string& line) {
  return std::any_of(s.patterns.begin(), s.patterns.end(),
                     [&](const Pattern& p) { return matches(p, line); });
}

std::string shown(const std::string& line) {
  if (line.size() <= kShownLineBytes) return line;
  return line.substr(0, kShownLineBytes) + " ...";
}

}  // namespace

LogScan scan_log(std::istream& log, const SignatureSet& signatures, size_t lines_per_finding) {
  const size_t n = signatures.signatures.size();
  std::vector<Finding> found(n);
  LogScan scan;
  std::string line;
  while (std::getline(log, line)) {
    ++scan.lines_read;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > kMaxLineBytes) line.resize(kMaxLineBytes);
    for (size_t i = 0; i < n; ++i) {
      const Signature& s = signatures.signatures[i];
      if (!matches_any(s, line)) continue;
      Finding& f = found[i];
      f.signature = &s;
      if (f.line_count++ < lines_per_finding) f.lines.push_back({scan.lines_read, shown(line)});
    }
  }
  for (Finding& f : found)
    if (f.signature) scan.findings.push_back(std::move(f));
  std::stable_sort(scan.findings.begin(), scan.findings.end(),
                   [](const Finding& a, const Finding& b) {
                     if (a.signature->priority != b.signature->priority)
                       return a.signature->priority > b.signature->priority;
                     return a.lines.front().number < b.lines.front().number;
                   });
  return scan;
}

}  // namespace lockstep::cli::explain
