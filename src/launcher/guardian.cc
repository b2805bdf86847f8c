#include "launcher/guardian.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

// Messages on the pipe: +pgid watch, -pgid forget, 0 dismiss. Each is one atomic 4-byte write.
constexpr int32_t kDismiss = 0;

[[noreturn]] void guardian_main(int read_fd) {
  ::prctl(PR_SET_NAME, "lockstep-guard");
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_IGN);  // outlive Ctrl-C
  int null_fd = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) ::dup2(null_fd, fd);  // hold no console pipes open
  std::set<pid_t> groups;
  for (;;) {
    int32_t message = 0;
    ssize_t n = ::read(read_fd, &message, sizeof(message));
    if (n < 0 && errno == EINTR) continue;
    if (n == sizeof(message) && message == kDismiss) ::_exit(0);
    if (n != sizeof(message)) break;  // EOF: the launcher died
    if (message > 0)
      groups.insert(message);
    else
      groups.erase(-message);
  }
  for (pid_t pgid : groups) ::kill(-pgid, SIGKILL);
  ::_exit(0);
}

}  // namespace

Guardian::Guardian() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error("cannot start the launcher's guardian: pipe failed: " + net::errno_text(errno));
  pid_ = ::fork();
  if (pid_ < 0)
    throw Error("cannot start the launcher's guardian: fork failed: " + net::errno_text(errno));
  if (pid_ == 0) {
    ::close(fds[1]);
    // Every other descriptor of the launcher, above all other write ends, must be closed here.
    ::close_range(3, fds[0] - 1, 0);
    ::close_range(fds[0] + 1, ~0U, 0);
    guardian_main(fds[0]);
  }
  ::close(fds[0]);
  pipe_ = net::Fd(fds[1]);
}

Guardian::~Guardian() {
  send(kDismiss);
  pipe_.reset();
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
}

void Guardian::watch(pid_t pgid) {
  send(pgid);
}
void Guardian::forget(pid_t pgid) {
  send(-pgid);
}

void Guardian::send(int32_t message) {
  // A dead guardian (EPIPE; SIGPIPE is ignored) only loses the safety net: keep going.
  while (::write(pipe_.get(), &message, sizeof(message)) < 0 && errno == EINTR) {
  }
}

}  // namespace lockstep::launcher
