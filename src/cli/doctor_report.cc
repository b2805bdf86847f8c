// Report: the lines `lockstep doctor` prints, and the count of problems (the exit code).
#include <algorithm>

#include "cli/doctor_checks.h"

namespace lockstep::cli::doctor {
namespace {

constexpr int kStatusWidth = 9;  // "problem  "

// By Status: ok, note, problem.
constexpr const char* kStatusWords[] = {"ok", "note", "problem"};

// Prints text; lines after the first are indented by `indent` spaces.
void print_indented(std::FILE* out, const std::string& text, int indent) {
  size_t start = 0;
  for (;;) {
    size_t nl = text.find('\n', start);
    std::fprintf(out, "%s\n", text.substr(start, nl - start).c_str());
    if (nl == std::string::npos || nl + 1 >= text.size()) return;
    std::fprintf(out, "%*s", indent, "");
    start = nl + 1;
  }
}

}  // namespace

void Report::ok(std::string topic, std::string text) {
  lines_.push_back({Status::ok, std::move(topic), std::move(text), {}});
}

void Report::note(std::string topic, std::string text, std::string fix) {
  lines_.push_back({Status::note, std::move(topic), std::move(text), std::move(fix)});
}

void Report::problem(std::string topic, std::string text, std::string fix) {
  lines_.push_back({Status::problem, std::move(topic), std::move(text), std::move(fix)});
}

int Report::problems() const {
  return static_cast<int>(std::count_if(lines_.begin(), lines_.end(),
                                        [](const Line& l) { return l.status == Status::problem; }));
}

void Report::print(std::FILE* out) const {
  for (const Line& l : lines_) {
    std::fprintf(out, "%-*s%s: ", kStatusWidth, kStatusWords[static_cast<int>(l.status)],
                 l.topic.c_str());
    print_indented(out, l.text, kStatusWidth + 2);
    if (l.fix.empty()) continue;
    std::fprintf(out, "%*sfix: ", kStatusWidth, "");
    print_indented(out, l.fix, kStatusWidth + 5);
  }
  const int n = problems();
  if (n == 0)
    std::fprintf(out, "\nno problems found\n");
  else
    std::fprintf(out, "\n%d problem%s found: fix %s before starting the job\n", n,
                 n == 1 ? "" : "s", n == 1 ? "it" : "them");
}

}  // namespace lockstep::cli::doctor
