#include "launcher/rank_output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace lockstep::launcher {

std::vector<std::string> LineSplitter::feed(std::string_view bytes) {
  std::vector<std::string> lines;
  pending_.append(bytes);
  size_t start = 0;
  for (;;) {
    size_t newline = pending_.find('\n', start);
    if (newline == std::string::npos) break;
    lines.emplace_back(pending_, start, newline - start);
    start = newline + 1;
  }
  pending_.erase(0, start);
  while (pending_.size() >= kMaxLineBytes) {
    lines.emplace_back(pending_, 0, kMaxLineBytes);
    pending_.erase(0, kMaxLineBytes);
  }
  return lines;
}

std::vector<std::string> LineSplitter::finish() {
  std::vector<std::string> lines;
  if (!pending_.empty()) lines.push_back(std::move(pending_));
  pending_.clear();
  return lines;
}

RankOutput::RankOutput(int rank, OutputRoute route, net::Fd log_file)
    : prefix_("[rank" + std::to_string(rank) + "]: "),
      route_(route),
      log_file_(std::move(log_file)) {}

void RankOutput::write(StreamKind stream, std::string_view bytes) {
  LineSplitter& splitter = stream == StreamKind::out ? out_ : err_;
  for (const auto& line : splitter.feed(bytes)) emit(stream, line);
}

void RankOutput::finish() {
  for (const auto& line : out_.finish()) emit(StreamKind::out, line);
  for (const auto& line : err_.finish()) emit(StreamKind::err, line);
  log_file_.reset();
}

// [Torch's prefix] torch 2.x starts each line of a rank's traceback with "[rankN]: " (its
// excepthook) and each of its C++ log lines with "[rankN]:". The console adds that tag already,
// and the traceback scanner and the summary read the line as the rank wrote it: both get it
// without torch's copy. The log file keeps the raw line.
std::string_view RankOutput::without_torch_prefix(std::string_view line) const {
  std::string_view tag(prefix_.data(), prefix_.size() - 1);  // "[rankN]:"
  if (!line.starts_with(tag)) return line;
  line.remove_prefix(tag.size());
  if (line.starts_with(' ')) line.remove_prefix(1);
  return line;
}

void RankOutput::emit(StreamKind stream, const std::string& raw) {
  bool is_out = stream == StreamKind::out;
  std::string line(without_torch_prefix(raw));
  if (is_out ? route_.out_to_console : route_.err_to_console)
    write_all(is_out ? STDOUT_FILENO : STDERR_FILENO, prefix_ + line + "\n");
  if (log_file_.valid() && (is_out ? route_.out_to_file : route_.err_to_file))
    write_all(log_file_.get(), raw + "\n");
  if (!is_out) {
    traceback_.feed(line);
    tail_.push_back(line);
    if (tail_.size() > kTailLines) tail_.pop_front();
  }
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {  // a non-blocking console: wait a little for room
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) > 0) continue;
    }
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void say(const std::string& line) {
  write_all(2, "lockstep run: " + line + "\n");
}

}  // namespace lockstep::launcher
