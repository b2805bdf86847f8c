// One rank's output: its stdout and stderr, cut into lines, prefixed with "[rankN]: " on the
// console (once: [Torch's prefix] in rank_output.cc) and copied raw to its log file.
//
// [Whole lines] The launcher is the only writer of its console, and every console line is one
// write(2) of prefix + line + '\n', so lines of different ranks never interleave mid-line. A line
// longer than kMaxLineBytes is cut into several lines rather than buffered without bound.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/python_error.h"
#include "net/socket.h"

namespace lockstep::launcher {

inline constexpr size_t kMaxLineBytes = 64 * 1024;
inline constexpr size_t kTailLines = 10;  // stderr lines kept for the failure summary

enum class StreamKind { out, err };

// Where each of one rank's streams goes.
struct OutputRoute {
  bool out_to_console = true;
  bool err_to_console = true;
  bool out_to_file = false;
  bool err_to_file = false;
};

// Splits a byte stream into lines (without their '\n').
class LineSplitter {
 public:
  // Appends bytes and returns the lines they complete.
  std::vector<std::string> feed(std::string_view bytes);
  // The unterminated rest, if any, as a last line (end of stream).
  std::vector<std::string> finish();

 private:
  std::string pending_;
};

class RankOutput {
 public:
  // log_file: an open file for this rank and attempt, or an invalid Fd for none.
  RankOutput(int rank, OutputRoute route, net::Fd log_file);

  // Routes bytes read from one of the rank's pipes.
  void write(StreamKind stream, std::string_view bytes);
  // End of both streams: flushes partial lines and closes the log file.
  void finish();
  // The last kTailLines lines the rank wrote to stderr, oldest first.
  std::vector<std::string> stderr_tail() const { return {tail_.begin(), tail_.end()}; }
  // The last Python traceback on its stderr, if any.
  const std::optional<PythonError>& python_error() const { return traceback_.last(); }

 private:
  void emit(StreamKind stream, const std::string& raw);
  std::string_view without_torch_prefix(std::string_view line) const;  // [Torch's prefix]
  std::string prefix_;
  OutputRoute route_;
  net::Fd log_file_;
  LineSplitter out_, err_;
  std::deque<std::string> tail_;
  TracebackScanner traceback_;
};

// Writes all of data to fd, retrying on EINTR and partial writes; errors are ignored (a closed
// console must not stop the job).
void write_all(int fd, std::string_view data);

// The launcher's own line on stderr: "lockstep run: <line>".
void say(const std::string& line);

}  // namespace lockstep::launcher
