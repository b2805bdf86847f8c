#include "launcher/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

struct Pipe {
  net::Fd read_end, write_end;
};

Pipe make_pipe(const std::string& program) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(
        detail::concat("cannot start ", program, ": pipe failed: ", net::errno_text(errno)));
  return Pipe{net::Fd(fds[0]), net::Fd(fds[1])};
}

// Runs in the forked child: only async-signal-safe calls until execve.
[[noreturn]] void exec_child(const ChildSpec& spec, char* const* argv, char* const* envp,
                             pid_t launcher, int out_fd, int err_fd, int status_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(1);  // the launcher died before the request took effect
  ::setpgid(0, 0);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  // The launcher catches or ignores these; the program starts with the defaults.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Descriptors the launcher opened without O_CLOEXEC must not leak into the ranks.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(spec.path.c_str(), argv, envp);
  int e = errno;
  (void)!::write(status_fd, &e, sizeof(e));
  ::_exit(127);
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Reads the exec status pipe: EOF means execve succeeded (the pipe is close-on-exec).
int exec_errno(int status_fd) {
  int e = 0;
  for (;;) {
    ssize_t n = ::read(status_fd, &e, sizeof(e));
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof(e)) ? e : 0;
  }
}

}  // namespace

StartedChild start_child(const ChildSpec& spec) {
  Pipe out = make_pipe(spec.path), err = make_pipe(spec.path), status = make_pipe(spec.path);
  std::vector<char*> argv = c_strings(spec.argv), envp = c_strings(spec.env);
  pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    throw Error(
        detail::concat("cannot start ", spec.path, ": fork failed: ", net::errno_text(errno)));
  if (pid == 0)
    exec_child(spec, argv.data(), envp.data(), launcher, out.write_end.get(), err.write_end.get(),
               status.write_end.get());
  ::setpgid(pid, pid);  // also here, so the group exists before start_child returns
  status.write_end.reset();
  int e = exec_errno(status.read_end.get());
  if (e != 0) {
    ::waitpid(pid, nullptr, 0);
    throw Error(
        detail::concat("cannot start ", spec.path, ": execve failed: ", net::errno_text(e)));
  }
  ::fcntl(out.read_end.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err.read_end.get(), F_SETFL, O_NONBLOCK);
  return StartedChild{pid, std::move(out.read_end), std::move(err.read_end)};
}

void signal_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

}  // namespace lockstep::launcher
