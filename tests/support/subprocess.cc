#include "support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "lockstep/core/deadline.h"
#include "net/socket.h"

extern char** environ;

namespace lockstep::testing {

Child::Child(const std::vector<std::string>& argv,
             const std::map<std::string, std::optional<std::string>>& env) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  // Build argv/envp before fork: no allocation in the child.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    auto name = s.substr(0, s.find('='));
    if (!env.count(name)) env_strings.push_back(s);
  }
  for (const auto& [k, v] : env)
    if (v) env_strings.push_back(k + "=" + *v);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env_strings) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::setpgid(0, 0);
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    const char msg[] = "exec failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(fds[1]);
  out_fd_ = fds[0];
}

Child::Child(Child&& o) noexcept
    : pid_(o.pid_), out_fd_(o.out_fd_), reaped_(o.reaped_), result_(std::move(o.result_)) {
  o.pid_ = -1;
  o.out_fd_ = -1;
  o.reaped_ = true;
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

void Child::kill(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

ProcessResult Child::wait(std::chrono::milliseconds timeout) {
  if (reaped_) return result_;
  Deadline deadline = Deadline::after(timeout);
  char buf[4096];
  bool eof = false;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      // Drain what is left in the pipe (grandchildren may hold it open: don't wait for EOF).
      for (;;) {
        pollfd p{out_fd_, POLLIN, 0};
        if (eof || ::poll(&p, 1, 50) <= 0) break;
        ssize_t n = ::read(out_fd_, buf, sizeof(buf));
        if (n <= 0) break;
        result_.output.append(buf, static_cast<size_t>(n));
      }
      reaped_ = true;
      if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) result_.signal = WTERMSIG(status);
      return result_;
    }
    if (deadline.expired()) {
      result_.timed_out = true;
      ::kill(pid_, SIGKILL);
      deadline = Deadline::after(std::chrono::seconds(5));
    }
    pollfd p{out_fd_, POLLIN, 0};
    int rc = eof ? 0 : ::poll(&p, 1, 20);
    if (eof) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (rc > 0) {
      ssize_t n = ::read(out_fd_, buf, sizeof(buf));
      if (n > 0)
        result_.output.append(buf, static_cast<size_t>(n));
      else
        eof = true;
    }
  }
}

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::optional<std::string>>& env,
                          std::chrono::milliseconds timeout) {
  Child c(argv, env);
  return c.wait(timeout);
}

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == EPERM;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(stat, s);
  auto close_paren = s.rfind(')');
  if (close_paren != std::string::npos && close_paren + 2 < s.size())
    return s[close_paren + 2] != 'Z';
  return true;
}

int free_port() {
  auto fd = net::listen_tcp("127.0.0.1", 0);
  return net::local_port(fd.get());
}

}  // namespace lockstep::testing
