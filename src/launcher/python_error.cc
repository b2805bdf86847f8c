#include "launcher/python_error.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

constexpr std::string_view kTracebackStart = "Traceback (most recent call last):";
constexpr std::string_view kFramePrefix = "  File \"";

// '  File "train.py", line 12, in main' (the ", in main" part is absent for a SyntaxError).
bool parse_frame(const std::string& line, PythonError& into) {
  if (!line.starts_with(kFramePrefix)) return false;
  size_t name_end = line.find("\", line ", kFramePrefix.size());
  if (name_end == std::string::npos) return false;
  into.file = line.substr(kFramePrefix.size(), name_end - kFramePrefix.size());
  into.line = std::atoi(line.c_str() + name_end + 8);
  size_t in = line.find(", in ", name_end);
  into.function = in == std::string::npos ? "" : line.substr(in + 5);
  return true;
}

// An exception line starts in column 0 and is not one of the interpreter's chaining notes.
bool is_exception_line(const std::string& line) {
  return !line.empty() && line[0] != ' ' && line[0] != '\t' && !line.starts_with(kTracebackStart);
}

}  // namespace

std::string PythonError::headline() const {
  if (file.empty()) return exception;
  std::string where = detail::concat(file, ":", line);
  if (!function.empty()) where += ", in " + function;
  return exception + " (at " + where + ")";
}

void TracebackScanner::feed(const std::string& line) {
  if (line.starts_with(kTracebackStart)) {
    in_traceback_ = true;
    current_ = PythonError{};
    return;
  }
  PythonError frame;
  if (parse_frame(line, frame)) {
    // A SyntaxError in the script itself prints its "File" line without a "Traceback" header.
    if (!in_traceback_) current_ = PythonError{};
    in_traceback_ = true;
    current_.file = frame.file;
    current_.line = frame.line;
    current_.function = frame.function;
    return;
  }
  if (!in_traceback_ || !is_exception_line(line)) return;
  current_.exception = line;
  last_ = current_;
  in_traceback_ = false;
}

std::optional<PythonError> read_error_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    auto json = nlohmann::json::parse(text.str());
    const auto& message = json.at("message");
    if (message.is_string()) return PythonError{.exception = message.get<std::string>()};
    PythonError error{.exception = message.at("message").get<std::string>()};
    error.exception = error.exception.substr(0, error.exception.find('\n'));
    if (message.contains("extraInfo") && message["extraInfo"].contains("py_callstack")) {
      TracebackScanner scanner;
      std::istringstream stack(message["extraInfo"]["py_callstack"].get<std::string>());
      for (std::string line; std::getline(stack, line);) scanner.feed(line);
      if (const auto& frame = scanner.last()) {
        error.file = frame->file;
        error.line = frame->line;
        error.function = frame->function;
      }
    }
    return error;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace lockstep::launcher
