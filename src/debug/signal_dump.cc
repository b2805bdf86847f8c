#include "debug/signal_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "debug/watchdog.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {
namespace {

// Leaked on purpose: the dumper thread may still use it while static objects are destroyed.
struct State {
  std::mutex mu;
  std::vector<const Watchdog*> live;
  bool installed = false;
};
State& state() {
  static State* s = new State;
  return *s;
}

int g_pipe_read = -1;    // read by the dumper thread
int g_pipe_write = -1;   // written by the handler only
pid_t g_owner_pid = -1;  // the process whose groups are registered

void on_signal(int sig) {
  int saved = errno;
  if (::getpid() != g_owner_pid) {  // a forked child: plain default behaviour
    ::signal(sig, SIG_DFL);
    ::kill(::getpid(), sig);
  } else {
    unsigned char byte = static_cast<unsigned char>(sig);
    (void)!::write(g_pipe_write, &byte, 1);
  }
  errno = saved;
}

void dump_all(int sig) {
  std::lock_guard<std::mutex> lock(state().mu);
  for (const Watchdog* w : state().live) {
    try {
      std::string path =
          w->dump(detail::concat("stopped by signal ", sig,
                                 " (SIGTERM: e.g. the launcher stopped this rank after "
                                 "another rank failed)"));
      log_line(LogLevel::warning, "received SIGTERM; flight recorder dump: " + path);
    } catch (const std::exception& e) {
      log_line(LogLevel::warning,
               std::string("received SIGTERM; no flight recorder dump: ") + e.what());
    }
  }
}

void dumper(int read_fd) {
  for (;;) {
    unsigned char byte = 0;
    ssize_t n = ::read(read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    dump_all(byte);
    ::signal(byte, SIG_DFL);
    ::kill(::getpid(), byte);
  }
}

// Called with the state's mutex held. A process forked from one that had installed it (its
// memory says installed, but the dumper thread did not survive the fork) installs it anew for
// its own groups: its own pipe, thread and pid, and none of its parent's groups.
void install_once() {
  State& s = state();
  const pid_t me = ::getpid();
  if (s.installed && g_owner_pid == me) return;
  const bool forked = s.installed;
  s.installed = true;
  struct sigaction old {};
  if (::sigaction(SIGTERM, nullptr, &old) != 0) return;
  const bool ours = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == on_signal;
  if (!ours && ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL))
    return;  // not ours to take
  if (forked) {
    if (g_owner_pid < 0) return;  // the parent had left a program's own handler alone
    s.live.clear();  // the parent's groups: copies here, whose threads did not survive the fork
    ::close(g_pipe_write);
    ::close(g_pipe_read);
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  g_pipe_read = fds[0];
  g_pipe_write = fds[1];
  g_owner_pid = me;
  std::thread(dumper, fds[0]).detach();
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace

void register_signal_dump(const Watchdog* watchdog) {
  std::lock_guard<std::mutex> lock(state().mu);
  install_once();
  state().live.push_back(watchdog);
}

void unregister_signal_dump(const Watchdog* watchdog) {
  std::lock_guard<std::mutex> lock(state().mu);
  auto& live = state().live;
  live.erase(std::remove(live.begin(), live.end(), watchdog), live.end());
}

}  // namespace lockstep::debug
