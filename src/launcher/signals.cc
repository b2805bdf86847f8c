#include "launcher/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

constexpr int kTerminationSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
int g_pipe[2] = {-1, -1};
struct sigaction g_previous[NSIG];

void on_signal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  (void)!::write(g_pipe[1], &byte, 1);  // a full pipe already wakes the loop: ignore EAGAIN
  errno = saved;
}

void install(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(sig, &action, &g_previous[sig]);
}

bool is_termination(int sig) {
  for (int s : kTerminationSignals)
    if (s == sig) return true;
  return false;
}

}  // namespace

SignalCatcher::SignalCatcher() {
  if (g_pipe[0] >= 0) throw Error("internal: only one SignalCatcher may exist per process");
  if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error("cannot create the launcher's signal pipe: " + std::string(strerror(errno)));
  for (int sig : kTerminationSignals) install(sig, on_signal);
  install(SIGCHLD, on_signal);
  install(SIGPIPE, SIG_IGN);
}

SignalCatcher::~SignalCatcher() {
  for (int sig : kTerminationSignals) ::sigaction(sig, &g_previous[sig], nullptr);
  ::sigaction(SIGCHLD, &g_previous[SIGCHLD], nullptr);
  ::sigaction(SIGPIPE, &g_previous[SIGPIPE], nullptr);
  ::close(g_pipe[0]);
  ::close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

int SignalCatcher::fd() const {
  return g_pipe[0];
}

std::vector<int> SignalCatcher::drain() {
  std::vector<int> termination;
  unsigned char bytes[64];
  for (;;) {
    ssize_t n = ::read(g_pipe[0], bytes, sizeof(bytes));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i)
      if (is_termination(bytes[i])) termination.push_back(bytes[i]);
  }
  if (first_termination_ == 0 && !termination.empty()) first_termination_ = termination.front();
  return termination;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace lockstep::launcher
