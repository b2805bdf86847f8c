#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "net/congestion.h"

namespace lockstep::net {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_text(int e) {
  return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string host_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return hostname() + "/" + boot_id;
}

namespace {

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

// Resolves host:port; throws NetworkError naming the host when it cannot be resolved.
void resolve(const std::string& host, uint16_t port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const char* node = host.empty() ? nullptr : host.c_str();
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(node, service.c_str(), &hints, &out.list);
  if (rc != 0)
    throw NetworkError(detail::concat("cannot resolve host '", host, "': ", ::gai_strerror(rc),
                                      ". Check MASTER_ADDR / the host name and /etc/hosts."));
}

std::string sockaddr_text(const sockaddr* sa, bool with_port) {
  char ip[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    port = ntohs(in6->sin6_port);
  }
  std::string s = ip;
  if (with_port) s += ":" + std::to_string(port);
  return s;
}

// Waits until fd is ready for `events` or the deadline passes; returns false on timeout.
bool wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw NetworkError("poll failed: " + errno_text(errno));
  }
}

}  // namespace

Fd listen_tcp(const std::string& host, uint16_t port, int backlog) {
  std::string bind_host = (host.empty() || host == "0.0.0.0") ? "0.0.0.0" : host;
  AddrInfo ai;
  resolve(bind_host, port, true, ai);
  int last_errno = 0;
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last_errno = errno;
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      last_errno = errno;
      continue;
    }
    return fd;
  }
  if (last_errno == EADDRINUSE)
    throw NetworkError(detail::concat(
        "port ", port, " is already in use on ", hostname(),
        " (another job, or a previous run still exiting): choose another with --master-port / "
        "MASTER_PORT, or use port 0 to pick a free one"));
  throw NetworkError(
      detail::concat("cannot listen on ", bind_host, ":", port, ": ", errno_text(last_errno)));
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return sockaddr_text(reinterpret_cast<sockaddr*>(&ss), false);
}

std::string address_toward(const std::string& host) {
  AddrInfo info;
  resolve(host, 9, false, info);
  for (addrinfo* a = info.list; a; a = a->ai_next) {
    Fd probe(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (probe.valid() && ::connect(probe.get(), a->ai_addr, a->ai_addrlen) == 0)
      return local_address(probe.get());
  }
  throw NetworkError(detail::concat("no route from this host to '", host, "'"));
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown";
  return sockaddr_text(reinterpret_cast<sockaddr*>(&ss), true);
}

namespace {

// One non-blocking connect attempt to one address; returns 0 or the errno.
int try_connect(const addrinfo* a, Deadline deadline, Fd& out) {
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
  if (!fd.valid()) return errno;
  if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    if (!wait_ready(fd.get(), POLLOUT, deadline)) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return err;
  }
  // Connecting to an unused port in the ephemeral range can, rarely, connect the socket to
  // itself (TCP simultaneous open); that is no server, so count it as refused.
  if (local_address(fd.get()) + ":" + std::to_string(local_port(fd.get())) ==
      peer_address(fd.get()))
    return ECONNREFUSED;
  set_nonblocking(fd.get(), false);
  out = std::move(fd);
  return 0;
}

}  // namespace

int connect_tcp_once(const std::string& host, uint16_t port, Deadline deadline, Fd& out) {
  AddrInfo ai;
  resolve(host, port, false, ai);
  int err = EHOSTUNREACH;
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    err = try_connect(a, deadline, out);
    if (err == 0) return 0;
  }
  return err;
}

Fd connect_tcp(const std::string& host, uint16_t port, Deadline deadline, bool log_progress) {
  auto backoff = milliseconds(10);
  auto started = Clock::now();
  auto next_log = started + std::chrono::seconds(5);
  std::string last_error = "none";
  for (;;) {
    try {
      Fd fd;
      int err = connect_tcp_once(host, port, deadline, fd);
      if (err == 0) return fd;
      last_error = errno_text(err);
    } catch (const NetworkError& e) {
      last_error = e.what();  // name resolution can fail transiently while DNS catches up
    }
    if (deadline.expired()) break;
    if (log_progress && Clock::now() >= next_log) {
      auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started);
      log_warning("still trying to reach ", host, ":", port, " after ", waited.count(),
                  " s (last error: ", last_error, ")");
      next_log = Clock::now() + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
  throw TimeoutError(detail::concat(
      "could not connect to ", host, ":", port, " before the deadline; last error: ", last_error,
      ". Is the master process running, and are MASTER_ADDR/MASTER_PORT right?"));
}

Fd accept_tcp(int listen_fd, Deadline deadline) {
  for (;;) {
    if (!wait_ready(listen_fd, POLLIN, deadline))
      throw TimeoutError("timed out waiting for an incoming connection");
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return Fd(fd);
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
      throw NetworkError("accept failed: " + errno_text(errno));
  }
}

void tune_tcp(int fd, int buffer_bytes) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  unpace_local_connection(fd);
  if (buffer_bytes > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
  keep_link_alive(fd, settings().link_timeout);
}

void keep_link_alive(int fd, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  const long long ms = timeout.count();
  int on = 1;
  int idle = static_cast<int>(std::max<long long>(1, ms / 3000));
  int interval = static_cast<int>(std::max<long long>(1, ms / 10000));
  int count = static_cast<int>(std::max<long long>(1, (ms / 1000) / interval));
  unsigned user_timeout = static_cast<unsigned>(std::min<long long>(ms, 0x7fffffff));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

bool is_unreachable(int err) {
  return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
}

std::string unreachable_text(int err) {
  if (err != ETIMEDOUT)
    return errno_text(err) + ": its host cannot be reached (a network partition, or a dead host)";
  const double s = static_cast<double>(settings().link_timeout.count()) / 1000.0;
  return detail::concat("nothing sent to it was acknowledged for ", s,
                        " s (LOCKSTEP_LINK_TIMEOUT): the network between the two hosts went "
                        "down, or its host did (a network partition, or a dead host)");
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void write_full(int fd, const void* data, size_t n, Deadline deadline, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLOUT, deadline)) throw TimeoutError("timed out sending to " + what);
      continue;
    }
    throw NetworkError("connection to " + what + " failed while sending: " + errno_text(errno));
  }
}

void read_full(int fd, void* data, size_t n, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw NetworkError("connection closed by " + what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, deadline)) throw TimeoutError("timed out receiving from " + what);
      continue;
    }
    throw NetworkError("connection to " + what + " failed while receiving: " + errno_text(errno));
  }
}

}  // namespace lockstep::net
