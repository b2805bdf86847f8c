// TcpStoreServer: one thread runs an event loop with epoll (store/event_poller.h) over the
// listening socket, an eventfd (written by the destructor to stop the loop at once) and every
// client's non-blocking socket. Requests go to a StoreService, which parks blocking requests
// instead of blocking the loop. The loop wakes at the earliest deadline of a parked request (so
// "timed out" replies go out on time) or of a connection (store/server_limits.h: a handshake not
// finished in time, a request or reply crawling), and each wake-up costs in proportion to what
// is ready, not to the number of connections held.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <thread>
#include <vector>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/fd_limit.h"
#include "net/socket.h"
#include "store/connection_table.h"
#include "store/event_poller.h"
#include "store/refusals.h"
#include "store/server_connection.h"
#include "store/server_limits.h"
#include "store/store_service.h"

namespace lockstep {

using store_detail::ConnectionTable;
using store_detail::EventPoller;
using store_detail::ServerConnection;
using store_detail::StoreService;
namespace sl = store_limits;

namespace {
constexpr size_t kScratchBytes = 256 * 1024;
// Keys of the two descriptors that are not connections; connections count up from kFirstId.
constexpr uint64_t kWakeKey = 0;
constexpr uint64_t kListenKey = 1;
constexpr uint64_t kFirstId = 2;
// The "connection" of the server's own requests (note_refusal): never a real one.
constexpr uint64_t kNoConnection = 0;
}  // namespace

struct TcpStoreServer::Impl {
  net::Fd listen_fd;
  net::Fd wake_fd;
  uint16_t port = 0;
  EventPoller poller{sl::kMaxEventsPerWait};
  ConnectionTable conns{poller};
  StoreService service{[this](uint64_t c, const store_proto::Message& m) { deliver(c, m); }};
  uint64_t next_id = kFirstId;
  std::optional<Clock::time_point> accept_paused_until;
  bool told_out_of_fds = false;  // the warning is logged once per server
  std::vector<char> scratch = std::vector<char>(kScratchBytes);
  std::string secret;  // "" : no authentication
  std::thread thread;

  void run();
  bool turn();
  int timeout_ms() const;
  // Accepts what the listen queue holds, up to kMaxAcceptsPerWake (the rest next turn).
  void accept_all();
  // Whether a connection waits in the listen queue.
  bool connection_queued() const;
  // Out of descriptors: drops the oldest unauthenticated connection; false when there is none.
  bool make_room(int error);
  void pause_accepting();
  void serve(ServerConnection& c, uint32_t events);
  void drop_dead();
  void note_refusal(const std::string& text);
  void deliver(uint64_t conn, const store_proto::Message& reply);
};

TcpStoreServer::TcpStoreServer(const TcpStoreServerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->secret = options.secret;
  const net::FdLimit before = net::fd_limit();
  const net::FdLimit now = net::raise_fd_limit(sl::kWantedOpenFiles);
  if (now.soft > before.soft)
    log_info("store server: raised this process's limit on open files from ", before.soft, " to ",
             now.soft, ", to hold many clients");
  impl_->listen_fd = net::listen_tcp(options.bind_host, options.port, sl::kListenBacklog);
  net::set_nonblocking(impl_->listen_fd.get(), true);
  impl_->port = net::local_port(impl_->listen_fd.get());
  impl_->wake_fd = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  LOCKSTEP_ENFORCE(impl_->wake_fd.valid(), NetworkError,
                   "store server: eventfd failed: ", net::errno_text(errno));
  impl_->poller.add(impl_->wake_fd.get(), kWakeKey, /*read=*/true, /*write=*/false);
  impl_->poller.add(impl_->listen_fd.get(), kListenKey, /*read=*/true, /*write=*/false);
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
  try {
    while (turn()) {
    }
  } catch (const std::exception& e) {
    log_line(LogLevel::error,
             detail::concat("store server on port ", port, " stopped: ", e.what()));
  }
}

// One turn of the loop; returns false when asked to stop.
bool TcpStoreServer::Impl::turn() {
  if (accept_paused_until && *accept_paused_until <= Clock::now()) {
    accept_paused_until.reset();
    poller.modify(listen_fd.get(), kListenKey, /*read=*/true, /*write=*/false);
  }
  bool accept = false;
  for (const epoll_event& e : poller.wait(timeout_ms())) {
    if (e.data.u64 == kWakeKey) return false;
    if (e.data.u64 == kListenKey) {
      accept = true;
    } else if (ServerConnection* c = conns.find(e.data.u64)) {
      serve(*c, e.events);
    }
  }
  // After serving: a connection dropped above frees its descriptor for the new ones.
  drop_dead();
  if (accept) accept_all();
  service.expire(Clock::now());
  conns.expire(Clock::now());
  drop_dead();
  return true;
}

int TcpStoreServer::Impl::timeout_ms() const {
  std::optional<Clock::time_point> next = service.next_deadline();
  for (auto other : {conns.next_deadline(), accept_paused_until})
    if (other && (!next || *other < *next)) next = other;
  if (!next) return -1;
  auto left = *next - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Round up, so that the loop does not spin through the last partial millisecond.
  return static_cast<int>(std::chrono::ceil<milliseconds>(left).count());
}

void TcpStoreServer::Impl::accept_all() {
  for (int i = 0; i < sl::kMaxAcceptsPerWake; ++i) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      // accept(2) fails for want of a descriptor before it looks for a connection: nothing to
      // make room for unless one is queued.
      if ((error == EMFILE || error == ENFILE) && !connection_queued()) return;
      if ((error == EMFILE || error == ENFILE) && make_room(error)) continue;
      if (error != EMFILE && error != ENFILE)
        log_warning("store server on port ", port, ": accept failed: ", net::errno_text(error),
                    "; retrying in ", sl::kAcceptPause.count(), " ms");
      return pause_accepting();
    }
    net::tune_tcp(fd, 0);
    conns.add(std::make_unique<ServerConnection>(next_id++, net::Fd(fd),
                                                 Deadline::after(sl::kHandshakeTimeout), secret));
  }
}

bool TcpStoreServer::Impl::connection_queued() const {
  pollfd p{listen_fd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

bool TcpStoreServer::Impl::make_room(int error) {
  if (!told_out_of_fds) {
    told_out_of_fds = true;
    log_warning("store server on port ", port, ": out of file descriptors (",
                net::errno_text(error), ") with ", conns.size(), " connections and a limit of ",
                net::fd_limit().soft,
                " open files. From now on, to accept a new connection it drops the oldest one "
                "that has not finished its handshake, and with none to drop it stops accepting "
                "for ",
                sl::kAcceptPause.count(),
                " ms at a time; its clients are served throughout. If real ranks may be among "
                "those dropped, raise the limit (`ulimit -n`). (Logged once.)");
  }
  ServerConnection* oldest = conns.oldest_in_handshake();
  if (!oldest) return false;
  oldest->mark_dead("dropped unauthenticated, to make room: out of file descriptors");
  conns.update(*oldest);
  drop_dead();
  return true;
}

void TcpStoreServer::Impl::pause_accepting() {
  accept_paused_until = Clock::now() + sl::kAcceptPause;
  poller.modify(listen_fd.get(), kListenKey, /*read=*/false, /*write=*/false);
}

void TcpStoreServer::Impl::serve(ServerConnection& c, uint32_t events) {
  try {
    if (c.wants_write()) {
      c.flush();  // watched for writing only: no reading until the reply is out
    } else if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      c.on_readable(scratch, [&](store_proto::Message&& request) {
        if (service.parked(c.id())) return false;
        service.handle(c.id(), std::move(request));
        return true;
      });
    }
  } catch (const std::exception& e) {
    c.mark_dead(e.what());
  }
  conns.update(c);
}

// Counts a connection turned away at the handshake in the store itself, for `lockstep doctor`
// (src/store/refusals.h). Requests of no connection: their replies go nowhere.
void TcpStoreServer::Impl::note_refusal(const std::string& text) {
  using store_proto::Command;
  service.handle(
      kNoConnection,
      {.code = static_cast<uint8_t>(Command::add), .number = 1, .strings = {kRefusedCountKey}});
  service.handle(kNoConnection,
                 {.code = static_cast<uint8_t>(Command::set), .strings = {kRefusedLastKey, text}});
}

void TcpStoreServer::Impl::drop_dead() {
  conns.drop_dead([this](ServerConnection& c) {
    const std::string text = detail::concat(
        "store server on port ", port, ": dropped connection from ", c.peer(), ": ", c.reason());
    log_line(c.refused() ? LogLevel::warning : LogLevel::info, text);
    service.forget(c.id());
    if (c.turned_away()) note_refusal(text);
  });
}

void TcpStoreServer::Impl::deliver(uint64_t conn, const store_proto::Message& reply) {
  if (ServerConnection* c = conns.find(conn)) {
    c->queue(reply);
    conns.update(*c);
  }
}

}  // namespace lockstep
