#include "backends/nccl/peer_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::nccl {

namespace {

// Processes can watch each other's pids only on one machine and in one pid namespace.
std::string pid_scope() {
  std::error_code ec;
  auto ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec);
  return net::host_identity() + "|" + (ec ? std::string("?") : ns.string());
}

}  // namespace

PeerWatch::PeerWatch(const GroupConfig& config, const std::string& key_prefix, Deadline deadline) {
  const std::string prefix = key_prefix + "pid/";
  const std::string scope = pid_scope();
  const int own_pid = static_cast<int>(::getpid());
  config.store->set(prefix + std::to_string(config.rank), scope + "\n" + std::to_string(own_pid));
  std::vector<std::string> keys;
  for (int r = 0; r < config.size; ++r) keys.push_back(prefix + std::to_string(r));
  auto values =
      config.store->multi_get(keys, std::max(deadline.remaining(), std::chrono::milliseconds(1)));
  pids_.assign(static_cast<size_t>(config.size), 0);
  pidfds_.assign(static_cast<size_t>(config.size), -1);
  by_kill_.assign(static_cast<size_t>(config.size), false);
  for (size_t r = 0; r < values.size(); ++r) {
    const std::string& v = values[r];
    size_t nl = v.rfind('\n');
    if (nl == std::string::npos) continue;
    int pid = 0;
    std::from_chars(v.data() + nl + 1, v.data() + v.size(), pid);
    pids_[r] = pid;
    if (v.compare(0, nl, scope) != 0 || pid <= 0 || pid == own_pid) continue;
    pidfds_[r] = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfds_[r] < 0) {
      const int err = errno;
      by_kill_[r] = true;
      static std::once_flag warned;
      std::call_once(warned, [&] {
        log_warning("group '", config.name, "': pidfd_open(", pid, ") failed (", std::strerror(err),
                    "); watching peers on this host with kill(pid, 0), "
                    "which a reused pid can fool");
      });
    }
  }
}

PeerWatch::~PeerWatch() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

std::optional<int> PeerWatch::first_dead() const {
  for (size_t r = 0; r < by_kill_.size(); ++r)
    if (by_kill_[r] && ::kill(pids_[r], 0) != 0 && errno == ESRCH) return static_cast<int>(r);
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (size_t r = 0; r < pidfds_.size(); ++r) {
    if (pidfds_[r] < 0) continue;
    fds.push_back({.fd = pidfds_[r], .events = POLLIN, .revents = 0});
    ranks.push_back(static_cast<int>(r));
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return std::nullopt;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents != 0) return ranks[i];
  return std::nullopt;
}

std::string PeerWatch::describe(int rank) const {
  return detail::concat("rank ", rank, " (pid ", pids_[static_cast<size_t>(rank)], ")");
}

}  // namespace lockstep::nccl
