#include "cli/explain_report.h"

#include <sstream>

namespace lockstep::cli::explain {
namespace {

constexpr size_t kWidth = 100;

// Prints `text` word-wrapped to kWidth columns: the first line after `first`, the others
// indented by `indent` spaces.
void print_wrapped(std::FILE* out, const std::string& first, size_t indent,
                   const std::string& text) {
  std::istringstream words(text);
  std::string word, line = first;
  size_t line_start_width = first.size();
  while (words >> word) {
    if (line.size() > line_start_width && line.size() + 1 + word.size() > kWidth) {
      std::fprintf(out, "%s\n", line.c_str());
      line = std::string(indent, ' ');
      line_start_width = indent;
    }
    if (line.size() > line_start_width) line += ' ';
    line += word;
  }
  std::fprintf(out, "%s\n", line.c_str());
}

std::string catalogue_text(const Signature& s) {
  if (s.catalogue == 0) return "";
  return ", failure catalogue entry " + std::to_string(s.catalogue);
}

void print_finding(std::FILE* out, size_t index, const Finding& f) {
  const Signature& s = *f.signature;
  std::fprintf(out, "%zu. %s\n", index, s.title.c_str());
  std::fprintf(out, "   signature %s%s\n", s.id.c_str(), catalogue_text(s).c_str());
  std::fprintf(out, "   matched %zu line%s%s\n", f.line_count, f.line_count == 1 ? "" : "s",
               f.line_count > f.lines.size() ? ", the first ones:" : ":");
  for (const MatchedLine& l : f.lines)
    std::fprintf(out, "     %zu: %s\n", l.number, l.text.c_str());
  std::fprintf(out, "   likely causes, most likely first:\n");
  for (size_t i = 0; i < s.causes.size(); ++i)
    print_wrapped(out, "     " + std::to_string(i + 1) + ". ", 8, s.causes[i]);
  std::fprintf(out, "   fix:\n");
  for (const std::string& fix : s.fixes) print_wrapped(out, "     - ", 7, fix);
}

}  // namespace

void print_findings(std::FILE* out, const LogScan& scan, const SignatureSet& signatures,
                    const std::string& log_name) {
  std::fprintf(out,
               "lockstep explain: %zu known problem%s in %s (%zu lines), most specific first\n",
               scan.findings.size(), scan.findings.size() == 1 ? "" : "s", log_name.c_str(),
               scan.lines_read);
  std::fprintf(out, "(signatures: %s)\n", signatures.source.c_str());
  for (size_t i = 0; i < scan.findings.size(); ++i) {
    std::fprintf(out, "\n");
    print_finding(out, i + 1, scan.findings[i]);
  }
}

void print_no_match(std::FILE* out, const LogScan& scan, const SignatureSet& signatures,
                    const std::string& log_name) {
  std::fprintf(out, "lockstep explain: no known signature in %s (%zu lines read).\n",
               log_name.c_str(), scan.lines_read);
  std::fprintf(out,
               "It knows %zu signatures (`lockstep explain --list` shows them), from\n  %s\n"
               "Look for the first error of the first rank that failed; `lockstep doctor` checks\n"
               "a job's environment.\n",
               signatures.signatures.size(), signatures.source.c_str());
}

void print_signature_list(std::FILE* out, const SignatureSet& signatures) {
  std::fprintf(out, "%zu signatures from %s\n", signatures.signatures.size(),
               signatures.source.c_str());
  std::fprintf(out, "%-30s %-9s %-8s %s\n", "signature", "catalogue", "priority", "title");
  for (const Signature& s : signatures.signatures) {
    std::string entry = s.catalogue ? std::to_string(s.catalogue) : "-";
    std::fprintf(out, "%-30s %-9s %-8d %s\n", s.id.c_str(), entry.c_str(), s.priority,
                 s.title.c_str());
  }
}

}  // namespace lockstep::cli::explain
