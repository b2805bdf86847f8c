// TcpStoreServer: one thread runs an event loop with poll(2) over the listening socket, an eventfd
// (written by the destructor to stop the loop at once) and every client's non-blocking socket.
// Requests go to a StoreService, which parks blocking requests instead of blocking the loop; the
// poll timeout is the earliest parked deadline, so "timed out" replies go out on time.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "store/server_connection.h"
#include "store/store_service.h"

namespace lockstep {

using store_detail::ServerConnection;
using store_detail::StoreService;

namespace {
// A connection must complete its handshake this soon after it is accepted.
constexpr milliseconds kHandshakeTimeout{10'000};
constexpr size_t kScratchBytes = 256 * 1024;
// Out of file descriptors: stop accepting for this long rather than spin on a readable listener.
constexpr milliseconds kAcceptPause{100};
}  // namespace

struct TcpStoreServer::Impl {
  net::Fd listen_fd;
  net::Fd wake_fd;
  uint16_t port = 0;
  std::map<uint64_t, std::unique_ptr<ServerConnection>> conns;
  StoreService service{[this](uint64_t c, const store_proto::Message& m) { deliver(c, m); }};
  uint64_t next_id = 1;
  std::optional<Clock::time_point> accept_paused_until;
  std::vector<char> scratch = std::vector<char>(kScratchBytes);
  std::string secret;  // "" : no authentication
  std::thread thread;

  void run();
  bool poll_once(std::vector<pollfd>& fds, std::vector<ServerConnection*>& order);
  int poll_timeout_ms() const;
  void accept_all();
  void serve(ServerConnection& c, short revents);
  void drop_dead();
  void deliver(uint64_t conn, const store_proto::Message& reply);
};

TcpStoreServer::TcpStoreServer(const TcpStoreServerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->secret = options.secret;
  impl_->listen_fd = net::listen_tcp(options.bind_host, options.port);
  net::set_nonblocking(impl_->listen_fd.get(), true);
  impl_->port = net::local_port(impl_->listen_fd.get());
  impl_->wake_fd = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  LOCKSTEP_ENFORCE(impl_->wake_fd.valid(), NetworkError,
                   "store server: eventfd failed: ", net::errno_text(errno));
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
  log_info("store server listening on ", options.bind_host, ":", impl_->port,
           impl_->secret.empty()
               ? " without a secret: anyone who reaches this port can read and write the job's "
                 "keys (set LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE; lockstep run sets one)"
               : " (clients must prove the job's secret)");
}

TcpStoreServer::~TcpStoreServer() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(impl_->wake_fd.get(), &one, sizeof(one));
  impl_->thread.join();
}

uint16_t TcpStoreServer::port() const {
  return impl_->port;
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<ServerConnection*> order;
  try {
    while (poll_once(fds, order)) {
    }
  } catch (const std::exception& e) {
    log_line(LogLevel::error,
             detail::concat("store server on port ", port, " stopped: ", e.what()));
  }
}

// One turn of the loop; returns false when asked to stop.
bool TcpStoreServer::Impl::poll_once(std::vector<pollfd>& fds,
                                     std::vector<ServerConnection*>& order) {
  fds.clear();
  order.clear();
  fds.push_back({wake_fd.get(), POLLIN, 0});
  if (accept_paused_until && *accept_paused_until <= Clock::now()) accept_paused_until.reset();
  fds.push_back({listen_fd.get(), static_cast<short>(accept_paused_until ? 0 : POLLIN), 0});
  for (auto& [id, c] : conns) {
    fds.push_back({c->fd(), static_cast<short>(c->wants_write() ? POLLOUT : POLLIN), 0});
    order.push_back(c.get());
  }
  int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (rc < 0 && errno != EINTR)
    throw NetworkError("store server: poll failed: " + net::errno_text(errno));
  if (rc > 0 && fds[0].revents) return false;
  if (rc > 0) {
    for (size_t i = 0; i < order.size(); ++i)
      if (fds[i + 2].revents) serve(*order[i], fds[i + 2].revents);
    if (fds[1].revents & POLLIN) accept_all();
  }
  auto now = Clock::now();
  service.expire(now);
  for (auto& [id, c] : conns)
    if (!c->handshaken() && c->handshake_deadline().at() <= now)
      c->mark_dead("no handshake within " + std::to_string(kHandshakeTimeout.count()) + " ms");
  drop_dead();
  return true;
}

int TcpStoreServer::Impl::poll_timeout_ms() const {
  std::optional<Clock::time_point> next = service.next_deadline();
  if (accept_paused_until && (!next || *accept_paused_until < *next)) next = accept_paused_until;
  for (const auto& [id, c] : conns)
    if (!c->handshaken() && (!next || c->handshake_deadline().at() < *next))
      next = c->handshake_deadline().at();
  if (!next) return -1;
  auto left = *next - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Round up, so that the loop does not spin through the last partial millisecond.
  return static_cast<int>(std::chrono::ceil<milliseconds>(left).count());
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      log_warning("store server on port ", port, ": accept failed: ", net::errno_text(errno),
                  errno == EMFILE || errno == ENFILE
                      ? " (out of file descriptors: raise `ulimit -n`; retrying shortly)"
                      : "");
      accept_paused_until = Clock::now() + kAcceptPause;
      return;
    }
    net::tune_tcp(fd, 0);
    uint64_t id = next_id++;
    conns.emplace(id, std::make_unique<ServerConnection>(
                          id, net::Fd(fd), Deadline::after(kHandshakeTimeout), secret));
  }
}

void TcpStoreServer::Impl::serve(ServerConnection& c, short revents) {
  try {
    if (c.wants_write()) return c.flush();  // polled for POLLOUT only: no reading until sent
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
      c.on_readable(scratch, [&](store_proto::Message&& request) {
        if (service.parked(c.id())) return false;
        service.handle(c.id(), std::move(request));
        return true;
      });
    }
  } catch (const std::exception& e) {
    c.mark_dead(e.what());
  }
}

void TcpStoreServer::Impl::drop_dead() {
  for (auto it = conns.begin(); it != conns.end();) {
    if (!it->second->dead()) {
      ++it;
      continue;
    }
    log_info("store server on port ", port, ": dropped connection from ", it->second->peer(), ": ",
             it->second->reason());
    service.forget(it->first);
    it = conns.erase(it);
  }
}

void TcpStoreServer::Impl::deliver(uint64_t conn, const store_proto::Message& reply) {
  auto it = conns.find(conn);
  if (it != conns.end()) it->second->queue(reply);
}

}  // namespace lockstep
