#include "cli/explain_signatures.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

// Where the installed data directory is, relative to the installed executable (set by CMake from
// CMAKE_INSTALL_BINDIR and CMAKE_INSTALL_DATADIR).
#ifndef LOCKSTEP_DATA_FROM_BIN
#define LOCKSTEP_DATA_FROM_BIN "../share/lockstep"
#endif

namespace lockstep::cli::explain {
namespace {

namespace fs = std::filesystem;
using detail::concat;

constexpr const char* kFileName = "explain_signatures.txt";

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

int parse_int(const std::string& value, int min, int max, const std::string& where) {
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < min || v > max)
    throw ConfigError(concat(where, ": '", value, "' is not an integer in [", min, ", ", max, "]"));
  return static_cast<int>(v);
}

// Index just past the character class that starts at pattern[i] == '['. In ECMAScript the first
// unescaped ']' closes it, even right after '[' or "[^" ("[]" matches nothing, "[^]" anything).
size_t skip_class(std::string_view p, size_t i) {
  ++i;
  if (i < p.size() && p[i] == '^') ++i;
  while (i < p.size() && p[i] != ']') i += p[i] == '\\' ? 2 : 1;
  return i + 1;
}

// The largest repeat count ({n,m}) or back-reference number (\n) a pattern may hold. std::regex
// (libstdc++) reads these numbers into a long without checking for overflow (undefined behaviour
// from 19 digits on), and expands a count into that many states; no log pattern needs more.
constexpr long kMaxPatternNumber = 1000;

// The digits at p[i], and whether they exceed kMaxPatternNumber.
struct Digits {
  size_t end;
  bool too_big;
};
Digits digits_at(std::string_view p, size_t i) {
  size_t end = i;
  while (end < p.size() && std::isdigit(static_cast<unsigned char>(p[end]))) ++end;
  const std::string_view d = p.substr(i, end - i);
  return {end, d.size() > 4 || (!d.empty() && std::stol(std::string(d)) > kMaxPatternNumber)};
}

// The first back-reference number or repeat count in `pattern` beyond kMaxPatternNumber, as
// written ("" when there is none). Character classes, where digits and braces are plain
// characters, are skipped.
std::string oversized_number(std::string_view p) {
  for (size_t i = 0; i < p.size();) {
    size_t first = std::string_view::npos;  // where the number starts
    if (p[i] == '[') {
      i = skip_class(p, i);
      continue;
    }
    if (p[i] == '\\' && i + 1 < p.size() && p[i + 1] >= '1' && p[i + 1] <= '9') first = i + 1;
    if (p[i] == '{') first = i + 1;
    if (first == std::string_view::npos) {
      i += p[i] == '\\' ? 2 : 1;
      continue;
    }
    Digits d = digits_at(p, first);
    if (!d.too_big && p[i] == '{' && d.end < p.size() && p[d.end] == ',') {
      first = d.end + 1;  // {n,m}
      d = digits_at(p, first);
    }
    if (d.too_big) return std::string(p.substr(first, d.end - first));
    i = d.end;
  }
  return "";
}

// Index just past the operand of the ECMAScript escape \e whose letter ends at pattern[i]: the
// hex digits of \xHH and \uHHHH, the letter of \cX, the further digits of a back-reference \12.
// They stand for one character, or none, never for themselves.
size_t skip_escape_operand(std::string_view p, char e, size_t i) {
  const size_t length = e == 'x' ? 2 : e == 'u' ? 4 : e == 'c' ? 1 : 0;
  if (length > 0) return std::min(p.size(), i + length);
  if (std::isdigit(static_cast<unsigned char>(e)))
    while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) ++i;
  return i;
}

// Parses a signatures file line by line; one instance per file.
class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  SignatureSet run() {
    std::istringstream in{std::string(text_)};
    std::string line;
    while (std::getline(in, line)) {
      ++line_no_;
      take(line);
    }
    finish_block();
    if (set_.signatures.empty()) throw error("the file has no signatures");
    set_.source = source_;
    return std::move(set_);
  }

 private:
  ConfigError error(const std::string& what) const {
    return ConfigError(concat(source_, ":", line_no_, ": ", what));
  }

  void take(const std::string& line) {
    std::string body = trim(line);
    if (body.empty() || body[0] == '#') {
      last_ = nullptr;
      return;
    }
    if (line[0] == ' ' || line[0] == '\t') {
      if (!last_) throw error("a continuation line (indented) must follow a title, cause or fix");
      *last_ += " " + body;
      return;
    }
    size_t colon = body.find(':');
    if (colon == std::string::npos) throw error("expected 'key: value', got '" + body + "'");
    set_value(trim(body.substr(0, colon)), trim(body.substr(colon + 1)));
  }

  void set_value(const std::string& key, const std::string& value) {
    last_ = nullptr;
    if (key == "signature") return start_block(value);
    if (!current_) throw error("'" + key + ":' before the first 'signature:' line");
    if (value.empty()) throw error("'" + key + ":' has no value");
    Signature& s = *current_;
    if (key == "title") {
      s.title = value;
      last_ = &s.title;
    } else if (key == "catalogue") {
      s.catalogue = parse_int(value, 1, 12, concat(source_, ":", line_no_, ": catalogue"));
    } else if (key == "priority") {
      s.priority = parse_int(value, 0, 100, concat(source_, ":", line_no_, ": priority"));
    } else if (key == "match") {
      s.patterns.push_back(compile(value));
    } else if (key == "cause") {
      last_ = &s.causes.emplace_back(value);
    } else if (key == "fix") {
      last_ = &s.fixes.emplace_back(value);
    } else {
      throw error("unknown key '" + key +
                  "' (known: signature, title, catalogue, priority, match, cause, fix)");
    }
  }

  Pattern compile(const std::string& text) const {
    if (std::string big = oversized_number(text); !big.empty())
      throw error(concat("signature '", current_->id, "': regular expression '", text,
                         "' holds the repeat count or back-reference ", big, "; at most ",
                         kMaxPatternNumber, " is supported"));
    try {
      return {text, std::regex(text, std::regex::ECMAScript | std::regex::optimize),
              required_literal(text)};
    } catch (const std::regex_error& e) {
      throw error(concat("signature '", current_->id, "': bad regular expression '", text,
                         "': ", e.what()));
    }
  }

  void start_block(const std::string& id) {
    finish_block();
    if (id.empty() ||
        id.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != std::string::npos)
      throw error("signature id '" + id + "' must be letters, digits and dashes");
    if (!ids_.insert(id).second) throw error("signature '" + id + "' is defined twice");
    current_ = &set_.signatures.emplace_back();
    current_->id = id;
    current_->line = line_no_;
  }

  void finish_block() {
    if (!current_) return;
    const Signature& s = *current_;
    const char* missing = s.title.empty()      ? "title"
                          : s.patterns.empty() ? "match"
                          : s.causes.empty()   ? "cause"
                          : s.fixes.empty()    ? "fix"
                                               : nullptr;
    if (missing)
      throw ConfigError(
          concat(source_, ":", s.line, ": signature '", s.id, "' has no '", missing, ":' line"));
    current_ = nullptr;
  }

  std::string_view text_;
  const std::string& source_;
  int line_no_ = 0;
  SignatureSet set_;
  std::set<std::string> ids_;
  Signature* current_ = nullptr;  // the block being read
  std::string* last_ = nullptr;   // the value a continuation line extends
};

std::string executable_directory() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::string required_literal(std::string_view p) {
  std::string best, run;
  auto end_run = [&] {
    if (run.size() > best.size()) best = run;
    run.clear();
  };
  int depth = 0;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      i += 2;
      if (std::isalnum(static_cast<unsigned char>(e))) {
        end_run();  // \d, \w, \b, \1, ...: not the character itself
        i = skip_escape_operand(p, e, i);
      } else if (depth == 0) {
        run += e;  // \( \. \[ ...
      }
      continue;
    }
    if (c == '[') {
      end_run();
      i = skip_class(p, i);
      continue;
    }
    if (c == '*' || c == '?' || c == '{') {  // the previous character may be absent
      if (!run.empty()) run.pop_back();
      end_run();
      size_t close = c == '{' ? p.find('}', i) : i;
      i = close == std::string_view::npos ? p.size() : close + 1;
      continue;
    }
    if (c == '|' && depth == 0) return "";  // alternatives of the whole pattern
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth > 0 || c == '(' || c == ')' || c == '.' || c == '^' || c == '$' || c == '+')
      end_run();
    else
      run += c;
    ++i;
  }
  end_run();
  return best;
}

SignatureSet parse_signatures(std::string_view text, const std::string& source) {
  return Parser(text, source).run();
}

SignatureSet load_signatures(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(concat("cannot read the signatures file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_signatures(text.str(), path);
}

std::string find_signatures_file(const std::string& override_path) {
  if (!override_path.empty()) return override_path;
  if (auto v = live_setting(LiveSetting::explain_signatures)) return *v;
  const std::string dir = executable_directory();
  std::vector<fs::path> candidates;
  if (!dir.empty()) {
    candidates.push_back(fs::path(dir) / LOCKSTEP_DATA_FROM_BIN / kFileName);  // install tree
    candidates.push_back(fs::path(dir) / "share" / "lockstep" / kFileName);    // build tree
  }
  std::string tried;
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c.lexically_normal().string();
    tried += "\n  " + c.lexically_normal().string();
  }
  throw ConfigError(concat("cannot find ", kFileName, "; looked in:", tried,
                           "\nInstall lockstep (cmake --install), or point ",
                           setting_name(LiveSetting::explain_signatures),
                           " (or --signatures) at the file (data/", kFileName,
                           " in the source tree)"));
}

}  // namespace lockstep::cli::explain
