#include "cli/bench_local.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "lockstep/core/error.h"
#include "net/socket.h"

extern char** environ;

namespace lockstep::cli::bench {
namespace {

using detail::concat;
using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_pending_signal = 0;
extern "C" void remember_signal(int sig) {
  g_pending_signal = sig;
}

constexpr const char* kJobVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

struct RankProcess {
  int rank = 0;
  pid_t pid = -1;
  bool running = true;
};

std::string self_executable() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0)
    throw ConfigError(concat("cannot find this executable through /proc/self/exe: ",
                             net::errno_text(errno), "; start the ranks with 'lockstep run'"));
  return std::string(path, static_cast<size_t>(n));
}

int pick_free_port() {
  net::Fd probe = net::listen_tcp("127.0.0.1", 0);
  return net::local_port(probe.get());
}

// This process's environment without the job variables, plus this rank's.
std::vector<std::string> rank_environment(int rank, int nranks, int port) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry = *e;
    std::string_view name = entry.substr(0, entry.find('='));
    bool ours = false;
    for (const char* v : kJobVariables) ours = ours || name == v;
    if (!ours) env.emplace_back(entry);
  }
  const std::string n = std::to_string(nranks), r = std::to_string(rank);
  for (const std::string& s :
       {"RANK=" + r, "WORLD_SIZE=" + n, "LOCAL_RANK=" + r, "LOCAL_WORLD_SIZE=" + n,
        std::string("MASTER_ADDR=127.0.0.1"), "MASTER_PORT=" + std::to_string(port)})
    env.push_back(s);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pid_t start_rank(const std::string& exe, std::vector<std::string> args,
                 std::vector<std::string> env) {
  args.insert(args.begin(), exe);
  std::vector<char*> argv = c_strings(args), envp = c_strings(env);  // no allocation after fork
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw ConfigError(concat("fork failed: ", net::errno_text(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the bench process
    if (::getppid() != parent) ::_exit(1);
    ::execve(argv[0], argv.data(), envp.data());
    const char msg[] = "lockstep bench: exec of a local rank failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  return pid;
}

std::string describe_exit(const RankProcess& p, int status) {
  std::string who = concat("rank ", p.rank, " (pid ", p.pid, ")");
  if (WIFEXITED(status)) return concat(who, " exited with code ", WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  std::string text = concat(who, " was killed by signal ", sig, " (", ::strsignal(sig), ")");
  if (sig == SIGKILL) text += "; if nobody sent it, the kernel's OOM killer may have (see dmesg)";
  return text;
}

void signal_running(std::vector<RankProcess>& ranks, int sig) {
  for (const RankProcess& p : ranks)
    if (p.running) ::kill(p.pid, sig);
}

// Reaps the ranks. After the first failure (or a signal to this process) the rest get
// grace_seconds to exit on their own, then SIGKILL. Returns the failure lines, first failure first.
std::vector<std::string> wait_for_ranks(std::vector<RankProcess>& ranks, int grace_seconds) {
  std::vector<std::string> failures;
  std::optional<Clock::time_point> kill_at;
  size_t running = ranks.size();
  while (running > 0) {
    if (int sig = g_pending_signal) {
      g_pending_signal = 0;
      signal_running(ranks, sig);
      if (!kill_at) kill_at = Clock::now() + std::chrono::seconds(grace_seconds);
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == ECHILD) break;
    if (pid <= 0) {
      if (kill_at && Clock::now() >= *kill_at) signal_running(ranks, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (RankProcess& p : ranks) {
      if (p.pid != pid || !p.running) continue;
      p.running = false;
      --running;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
      failures.push_back(describe_exit(p, status));
      if (!kill_at) kill_at = Clock::now() + std::chrono::seconds(grace_seconds);
    }
  }
  return failures;
}

}  // namespace

int run_local_job(const LocalJobOptions& options) {
  const std::string exe = self_executable();
  const int port = options.master_port > 0 ? options.master_port : pick_free_port();
  std::fflush(nullptr);  // the ranks share our stdout: nothing of ours may be printed twice
  struct sigaction action {
  }, old_int{}, old_term{};
  action.sa_handler = remember_signal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);
  std::vector<RankProcess> ranks;
  try {
    for (int r = 0; r < options.nranks; ++r)
      ranks.push_back(
          {.rank = r,
           .pid = start_rank(exe, options.rank_args, rank_environment(r, options.nranks, port))});
  } catch (...) {
    signal_running(ranks, SIGKILL);
    wait_for_ranks(ranks, 0);
    throw;
  }
  std::vector<std::string> failures = wait_for_ranks(ranks, options.failure_grace_seconds);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  for (const std::string& f : failures) std::fprintf(stderr, "lockstep bench: %s\n", f.c_str());
  if (!failures.empty())
    std::fprintf(stderr,
                 "lockstep bench: %zu of %d local ranks failed (port %d); the first "
                 "failure is the likely cause, the others usually follow from it\n",
                 failures.size(), options.nranks, port);
  return failures.empty() ? 0 : 1;
}

}  // namespace lockstep::cli::bench
