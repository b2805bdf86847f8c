#include "launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "launcher/child_process.h"
#include "launcher/guardian.h"
#include "launcher/signals.h"
#include "lockstep/core/error.h"

extern char** environ;

namespace lockstep::launcher {

using std::chrono::milliseconds;

struct Supervisor::Slot {
  int rank = 0;
  int local_rank = 0;
  std::string error_file;
  pid_t pid = -1;
  net::Fd out, err;
  std::unique_ptr<RankOutput> output;
  bool running = false;
  bool signalled = false;
  // When both pipes reached end of file: a rank's exit closes them a moment before waitpid can
  // reap it, so this orders exits that one reap() finds together.
  std::optional<Clock::time_point> pipes_closed;
};

namespace {

constexpr milliseconds kDrainTime{1000};  // for output still in the pipes after the last exit

net::Fd open_log_file(const std::string& dir, int rank) {
  if (dir.empty()) return net::Fd();
  std::string path = dir + "/rank_" + std::to_string(rank) + ".log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(detail::concat("cannot create log file ", path, ": ", net::errno_text(errno),
                               "; check --log-dir"));
  return net::Fd(fd);
}

}  // namespace

Supervisor::Supervisor(AttemptPlan plan, Guardian& guardian, SignalCatcher& signals,
                       RemoteCheck remote)
    : plan_(std::move(plan)), guardian_(guardian), signals_(signals), remote_(std::move(remote)) {
  result_.attempt = plan_.attempt;
  result_.host = plan_.host;
  next_remote_check_ = Clock::now() + plan_.monitor_interval;
}

Supervisor::~Supervisor() {
  for (auto& slot : slots_) {
    if (!slot->running) continue;
    signal_group(slot->pid, SIGKILL);
    ::waitpid(slot->pid, nullptr, 0);
    guardian_.forget(slot->pid);
  }
}

void Supervisor::start_all() {
  for (int local = 0; local < plan_.nproc; ++local) {
    auto slot = std::make_unique<Slot>();
    slot->local_rank = local;
    slot->rank = plan_.rank_offset + local;
    slot->output = std::make_unique<RankOutput>(slot->rank, plan_.routes.at(local),
                                                open_log_file(plan_.log_dir, slot->rank));
    if (!plan_.error_dir.empty())
      slot->error_file = plan_.error_dir + "/rank_" + std::to_string(slot->rank) + ".error.json";
    RankPlacement placement{.rank = slot->rank,
                            .local_rank = local,
                            .world_size = plan_.world_size,
                            .local_world_size = plan_.nproc,
                            .group_rank = plan_.node_rank,
                            .group_world_size = plan_.nnodes,
                            .error_file = slot->error_file};
    ChildSpec spec{.path = plan_.program_path,
                   .argv = plan_.argv,
                   .env = child_environment(placement, plan_.job, environ)};
    StartedChild child = start_child(spec);
    guardian_.watch(child.pid);
    slot->pid = child.pid;
    slot->out = std::move(child.out);
    slot->err = std::move(child.err);
    slot->running = true;
    slots_.push_back(std::move(slot));
  }
}

AttemptResult Supervisor::run() {
  start_all();
  while (any_running()) {
    pump(next_wait());
    handle_signals();
    reap();
    check_remote();
    enforce_kill_deadline();
  }
  finish();
  if (result_.root_cause) describe(*result_.root_cause);
  for (auto& exit : result_.other_failures) describe(exit);
  return result_;
}

// Adds what the rank's output and error file tell: its last stderr lines, and the Python
// exception it died of (@record's error file first, as torchrun reads it).
void Supervisor::describe(RankExit& exit) const {
  const Slot& slot = *slots_.at(static_cast<size_t>(exit.local_rank));
  exit.stderr_tail = slot.output->stderr_tail();
  std::optional<PythonError> error;
  if (!slot.error_file.empty()) error = read_error_file(slot.error_file);
  if (error) exit.error_file = slot.error_file;
  if (!error) error = slot.output->python_error();
  if (error) exit.headline = error->headline();
  if (exit.headline.empty()) exit.headline = uncaught_exception(exit.stderr_tail);
}

// Waits up to `wait` for output or a signal, and routes whatever output is there.
void Supervisor::pump(milliseconds wait) {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<std::pair<Slot*, StreamKind>> owners{{nullptr, StreamKind::out}};
  for (auto& slot : slots_) {
    for (StreamKind stream : {StreamKind::out, StreamKind::err}) {
      const net::Fd& fd = stream == StreamKind::out ? slot->out : slot->err;
      if (!fd.valid()) continue;
      fds.push_back({fd.get(), POLLIN, 0});
      owners.emplace_back(slot.get(), stream);
    }
  }
  int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  if (ready <= 0) return;
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents != 0) read_pipe(*owners[i].first, owners[i].second);
}

void Supervisor::read_pipe(Slot& slot, StreamKind stream) {
  net::Fd& fd = stream == StreamKind::out ? slot.out : slot.err;
  char buffer[64 * 1024];
  for (int reads = 0; reads < 4; ++reads) {  // bounded, so one chatty rank cannot starve others
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      slot.output->write(stream, std::string_view(buffer, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && errno == EAGAIN) return;
    fd.reset();  // EOF (or a broken pipe): this stream is done
    if (!slot.out.valid() && !slot.err.valid()) slot.pipes_closed = Clock::now();
    return;
  }
}

// Reaps every rank that has ended, in the order they ended as far as the pipes tell: the rank
// whose pipes closed first is the first failure, though a later one may sit lower in the table
// (a rank that raised, and its peer that then lost the connection, are often reaped together).
void Supervisor::reap() {
  struct Ended {
    size_t index;
    int status;
    Clock::time_point closed;
  };
  std::vector<Ended> ended;
  const auto now = Clock::now();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i]->running) continue;
    int status = 0;
    if (::waitpid(slots_[i]->pid, &status, WNOHANG) == slots_[i]->pid)
      ended.push_back({i, status, slots_[i]->pipes_closed.value_or(now)});
  }
  std::stable_sort(ended.begin(), ended.end(),
                   [](const Ended& a, const Ended& b) { return a.closed < b.closed; });
  for (const Ended& e : ended) on_exit(e.index, e.status);
}

void Supervisor::on_exit(size_t index, int status) {
  Slot& slot = *slots_[index];
  slot.running = false;
  RankExit exit{.rank = slot.rank,
                .local_rank = slot.local_rank,
                .pid = slot.pid,
                .exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0,
                .signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                .time = std::chrono::system_clock::now()};
  exit.stopped_by_launcher = slot.signalled && !exit.died_by_itself();
  if (!exit.failed()) return;
  if (!stopping_) {
    root_slot_ = static_cast<int>(index);
    result_.end = AttemptEnd::failed;
    result_.root_cause = exit;
    begin_stop(SIGTERM);
    return;
  }
  result_.other_failures.push_back(exit);
}

void Supervisor::handle_signals() {
  for (int sig : signals_.drain()) {
    if (!stopping_) {
      result_.end = AttemptEnd::interrupted;
      result_.signal = sig;
      begin_stop(sig);
      continue;
    }
    for (auto& slot : slots_)  // asked again while stopping: no more grace
      if (slot->running) signal_group(slot->pid, SIGKILL);
  }
}

void Supervisor::check_remote() {
  if (!remote_ || stopping_ || Clock::now() < next_remote_check_) return;
  next_remote_check_ = Clock::now() + plan_.monitor_interval;
  std::optional<RemoteFailure> failure;
  try {
    failure = remote_();
  } catch (const std::exception& e) {
    failure = RemoteFailure{.node_rank = 0,
                            .exit_code = 1,
                            .what = std::string("lost contact with node 0's store: ") + e.what(),
                            .restartable = false};
  }
  if (!failure) return;
  result_.end = AttemptEnd::remote_failed;
  result_.remote = failure;
  begin_stop(SIGTERM);
}

void Supervisor::begin_stop(int sig) {
  stopping_ = true;
  for (auto& slot : slots_) {
    if (!slot->running) continue;
    signal_group(slot->pid, sig);
    slot->signalled = true;
  }
  kill_deadline_ = Deadline::after(plan_.term_timeout);
}

void Supervisor::enforce_kill_deadline() {
  if (!kill_deadline_ || !kill_deadline_->expired()) return;
  for (auto& slot : slots_)
    if (slot->running) signal_group(slot->pid, SIGKILL);
  kill_deadline_.reset();
}

milliseconds Supervisor::next_wait() const {
  milliseconds wait = plan_.monitor_interval;
  if (kill_deadline_) wait = std::min(wait, kill_deadline_->remaining());
  if (remote_ && !stopping_) wait = std::min(wait, Deadline(next_remote_check_).remaining());
  return std::max(wait, milliseconds(0));
}

bool Supervisor::any_running() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->running; });
}

// Every rank has ended: kill what they left behind, then read the pipes to the end.
void Supervisor::finish() {
  for (auto& slot : slots_) {
    signal_group(slot->pid, SIGKILL);
    guardian_.forget(slot->pid);
  }
  Deadline drain = Deadline::after(kDrainTime);
  auto open = [&] {
    return std::any_of(slots_.begin(), slots_.end(),
                       [](const auto& s) { return s->out.valid() || s->err.valid(); });
  };
  while (open() && !drain.expired()) {
    pump(std::min(drain.remaining(), milliseconds(100)));
    handle_signals();
  }
  for (auto& slot : slots_) slot->output->finish();
}

}  // namespace lockstep::launcher
