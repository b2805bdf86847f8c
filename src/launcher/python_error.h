// What a Python rank died of, for the failure summary's headline: the exception line
// ("RuntimeError: boom") and the innermost frame of its traceback (file, line, function).
//
// Two sources, as torchrun uses them:
//   - the rank's stderr, where the interpreter prints the traceback of an uncaught exception
//     (TracebackScanner sees every stderr line, not just the last few that the summary shows);
//   - the error file that torchrun's @record decorator writes to TORCHELASTIC_ERROR_FILE:
//     {"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "Traceback
//     ...", "timestamp": "..."}}}. When it exists, it wins.
#pragma once

#include <optional>
#include <string>

namespace lockstep::launcher {

struct PythonError {
  std::string exception;  // "RuntimeError: boom" (its first line)
  std::string file;       // innermost frame; empty when the traceback had none
  int line = 0;
  std::string function;  // "<module>", "main", ...

  // "RuntimeError: boom (at train.py:12, in main)"
  std::string headline() const;
};

// Follows a stderr stream line by line and keeps the last complete traceback.
class TracebackScanner {
 public:
  void feed(const std::string& line);
  const std::optional<PythonError>& last() const { return last_; }

 private:
  bool in_traceback_ = false;
  PythonError current_;
  std::optional<PythonError> last_;
};

// The error @record wrote to `path`; nullopt when there is no such file or it is not one of
// @record's (never throws: the summary must not fail on a bad file).
std::optional<PythonError> read_error_file(const std::string& path);

}  // namespace lockstep::launcher
