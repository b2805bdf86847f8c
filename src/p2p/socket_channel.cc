#include "p2p/socket_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "net/bind.h"
#include "net/listener_record.h"
#include "store/refusals.h"

namespace lockstep::p2p {

namespace {

// How long a newcomer may take to send its hello before it is dropped.
constexpr milliseconds kHelloGrace{5000};
// How long a published peer may refuse connections before it counts as gone.
constexpr milliseconds kRefusedGrace{2000};
// Connections accepted per service() round at most (the rest wait for the next round).
constexpr int kAcceptsPerRound = 64;

// The address peers connect to: the advertise address, else this host's name (as the tcp mesh).
std::string advertised_host(const GroupConfig& config) {
  return config.advertise_address.empty() ? net::hostname() : config.advertise_address;
}

}  // namespace

SocketChannel::SocketChannel(const GroupConfig& config)
    : config_(config),
      rank_(config.rank),
      size_(config.size),
      me_{.service = net::Service::p2p,
          .group = config.name,
          .size = config.size,
          .rank = config.rank,
          .host = host_name_of(config),
          .has_secret = !config.secret.empty()},
      peers_(std::make_unique<Peer[]>(static_cast<size_t>(config.size))) {
  LOCKSTEP_ENFORCE(config.store, InvalidArgument, "SocketChannel: group '", config.name,
                   "' has no store");
  LOCKSTEP_ENFORCE(rank_ >= 0 && rank_ < size_, InvalidArgument, "SocketChannel: rank ", rank_,
                   " outside a group of ", size_);
  wake_fd_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  LOCKSTEP_ENFORCE(wake_fd_.valid(), NetworkError, prefix(),
                   "eventfd failed: ", net::errno_text(errno));
  listener_ = net::listen_where_advertised(
      advertised_host(config), 0,
      detail::concat("group '", config.name, "' rank ", config.rank, " (p2p)"));
  net::set_nonblocking(listener_.get(), true);
  challenge_ = auth::make_nonce();
  const std::string record = net::format_listener_record(
      advertised_host(config), net::local_port(listener_.get()), me_.host, challenge_);
  address_ = net::parse_listener_record(record, rank_).address;
  config_.store->set(net::listener_key(config.name, net::Service::p2p, rank_), record);
}

SocketChannel::~SocketChannel() = default;

void SocketChannel::check_peer(int peer) const {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < size_, InvalidArgument, prefix(), "peer ", peer,
                   " is outside the group (size ", size_, ")");
}

std::string SocketChannel::prefix() const {
  return detail::concat("group '", config_.name, "' rank ", rank_, ": ");
}

std::string SocketChannel::describe(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  std::string where;
  if (p.pid > 0) where = detail::concat("pid ", p.pid, " on ", p.host);
  if (!p.address.empty())
    where += (where.empty() ? "" : ", ") + p.address;
  else if (!p.remote.empty())
    where += (where.empty() ? "" : ", ") + p.remote;
  return detail::concat("rank ", peer, where.empty() ? "" : " (" + where + ")");
}

// ---- writing ----

void SocketChannel::connect(int peer, Deadline deadline) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  const std::string key = net::listener_key(config_.name, net::Service::p2p, peer);
  std::string record;
  try {
    record = config_.store->get(key, std::max(deadline.remaining(), milliseconds(1)));
  } catch (const TimeoutError& e) {
    throw TimeoutError(detail::concat(
        prefix(), "rank ", peer, " never published its p2p address (store key '", key,
        "') before the deadline: did it start, and make its side of the group? (", e.what(), ")"));
  }
  const net::ListenerRecord listener = net::parse_listener_record(record, peer);
  p.address = listener.address;
  p.challenge = listener.challenge;
  const std::string& host = listener.host;
  const uint16_t port = listener.port;
  net::Fd fd;
  std::string error;
  auto refused_since = Clock::time_point::max();
  auto backoff = milliseconds(5);
  for (;;) {
    int err = 0;
    try {
      err = net::connect_tcp_once(host, port, deadline, fd);
      if (err == 0) break;
      error = net::errno_text(err);
    } catch (const NetworkError& e) {
      error = e.what();  // name resolution can fail transiently
    }
    auto now = Clock::now();
    if (deadline.expired())
      throw TimeoutError(detail::concat(prefix(), "could not connect to ", describe(peer),
                                        " before the deadline (last error: ", error, ")"));
    if (err == ECONNREFUSED && leaving_) {
      // Only this rank's goodbyes are still written: a peer without a listener has left (or
      // died), and has nothing left to fail with this rank. Waiting out kRefusedGrace here would
      // hold every rank's exit after an error that all of them saw.
      throw NetworkError(detail::concat(prefix(), describe(peer), " refuses connections (", error,
                                        "): it has left"));
    }
    if (err != ECONNREFUSED) {
      refused_since = Clock::time_point::max();
    } else if (refused_since == Clock::time_point::max()) {
      refused_since = now;
    } else if (now - refused_since >= kRefusedGrace) {
      throw NetworkError(detail::concat(prefix(), describe(peer), " refuses connections (", error,
                                        "): its process has probably exited"));
    }
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, milliseconds(100));
  }
  p.sent = net::send_hello(fd.get(), net::make_hello(me_), config_.secret, p.challenge, deadline,
                           describe(peer));
  // The reader's verdict comes when its engine thread next services its listener: checked as it
  // arrives (check_verdict), so that no write ever blocks on the peer's engine.
  p.verdict_by = Clock::now() + kHelloGrace;
  net::set_nonblocking(fd.get(), true);
  net::tune_tcp(fd.get(), 0);
  std::lock_guard lock(mu_);
  p.out = std::move(fd);
  p.out_pollable = true;
}

// Reads what has come of the reader's verdict on this rank's connection, without blocking; once
// it is whole, checks it. A refusal, a reader that cannot prove the job's secret, or one that
// says nothing within kHelloGrace: the stream fails (out_error, AuthError from write()). A
// connection that ends first is a reader that died or left, reported as such.
void SocketChannel::check_verdict(Peer& p, int peer) {
  if (p.verdict_got == sizeof(auth::Verdict) || !p.out_error.empty() || !p.out.valid()) return;
  std::string why;
  for (;;) {
    ssize_t n = ::recv(p.out.get(), reinterpret_cast<char*>(&p.verdict) + p.verdict_got,
                       sizeof(auth::Verdict) - p.verdict_got, MSG_DONTWAIT);
    if (n > 0) {
      p.verdict_got += static_cast<size_t>(n);
      if (p.verdict_got < sizeof(auth::Verdict)) continue;
      try {
        auth::check_verdict(config_.secret, p.challenge, p.sent, p.verdict, describe(peer));
        return;
      } catch (const AuthError& e) {
        why = e.what();
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Clock::now() < p.verdict_by) return;
      why = detail::concat(describe(peer), " gave no verdict on this rank's connection within ",
                           kHelloGrace.count(), " ms: it is not a rank of this job");
    } else {
      // The connection ended first: the reader died or left (broken() and the next send say
      // which, as for any stream); nothing more will be read from it, and nothing goes through.
      p.verdict_got = sizeof(auth::Verdict);
      return;
    }
    break;
  }
  p.out_error = why;
  p.out_auth_failed = true;
  std::lock_guard lock(mu_);
  p.out_pollable = false;
}

size_t SocketChannel::write(int peer, const std::byte* data, size_t bytes, Deadline deadline) {
  check_peer(peer);
  Peer& p = peers_[static_cast<size_t>(peer)];
  check_verdict(p, peer);
  if (!p.out_error.empty()) {
    if (p.out_auth_failed) throw AuthError(prefix() + p.out_error);
    throw NetworkError(prefix() + p.out_error);
  }
  LOCKSTEP_ENFORCE(!closed_, InvalidArgument, prefix(), "write to rank ", peer,
                   " after the channel was closed");
  if (!p.out.valid()) connect(peer, deadline);
  if (bytes == 0) return 0;
  for (;;) {
    ssize_t n = ::send(p.out.get(), data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    int e = errno;
    if (e == EINTR) continue;
    if (e == EAGAIN || e == EWOULDBLOCK) return 0;
    p.out_error =
        (e == EPIPE || e == ECONNRESET)
            ? detail::concat("the connection to ", describe(peer), " was reset (its process died?)")
        : net::is_unreachable(e)
            ? detail::concat("sending to ", describe(peer), " failed: ", net::unreachable_text(e))
            : detail::concat("sending to ", describe(peer), " failed: ", net::errno_text(e));
    {
      std::lock_guard lock(mu_);
      p.out_pollable = false;
    }
    throw NetworkError(prefix() + p.out_error);
  }
}

// ---- reading ----

size_t SocketChannel::read(int peer, std::byte* data, size_t bytes) {
  check_peer(peer);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (bytes == 0 || p.in_state != Inbound::open || !p.readable.load()) return 0;
  for (;;) {
    ssize_t n = ::recv(p.in.get(), data, bytes, MSG_DONTWAIT);
    if (n > 0) {
      if (static_cast<size_t>(n) < bytes) p.readable.store(false);
      return static_cast<size_t>(n);
    }
    if (n == 0) {
      end_inbound(p, Inbound::eof, 0);
      return 0;
    }
    int e = errno;
    if (e == EINTR) continue;
    if (e == EAGAIN || e == EWOULDBLOCK) {
      p.readable.store(false);
      return 0;
    }
    end_inbound(p, Inbound::reset, e);
    return 0;
  }
}

void SocketChannel::end_inbound(Peer& p, Inbound state, int err) {
  std::lock_guard lock(mu_);  // sleep() stops polling it (it would stay readable forever)
  p.in_state = state;
  p.in_errno = err;
  p.readable.store(false);
}

bool SocketChannel::has_unread(Peer& p) {
  if (p.in_state != Inbound::open) return false;
  char c;
  return ::recv(p.in.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

std::string SocketChannel::broken(int peer) {
  check_peer(peer);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.why.empty()) return p.why;
  check_verdict(p, peer);
  if (p.out_auth_failed) return p.why = p.out_error;
  if (p.in_state == Inbound::reset && net::is_unreachable(p.in_errno)) {
    p.why = detail::concat("the connection from ", describe(peer),
                           " failed: ", net::unreachable_text(p.in_errno));
  } else if (p.in_state == Inbound::reset) {
    p.why = detail::concat("the connection from ", describe(peer), " was reset (",
                           net::errno_text(p.in_errno), "; its process died?)");
  } else if (p.in_state == Inbound::eof) {
    bool closed = false;
    try {
      closed = config_.store->check({store_key(config_, "socket_closed", peer)});
    } catch (const Error& e) {
      log_info(prefix(), "could not ask the store whether rank ", peer, " closed: ", e.what());
    }
    p.why = closed ? detail::concat("rank ", peer, " closed its end of the stream")
                   : detail::concat(describe(peer),
                                    " died: its stream ended without an orderly "
                                    "close (the process exited or was killed)");
  } else if (!p.out_error.empty() && !has_unread(p)) {
    p.why = p.out_error;
  }
  return p.why;
}

// ---- accepting, readiness ----

bool SocketChannel::advance(Pending& q) {
  const auto state = q.advance(me_);
  if (state == Pending::State::reading) return false;
  std::string problem = q.problem();
  if (state == Pending::State::ready &&
      peers_[static_cast<size_t>(q.hello().rank)].in_state != Inbound::none)
    problem = detail::concat("claims rank ", q.hello().rank, ", which is already connected");
  if (!problem.empty()) {
    log_info(prefix(), "dropped a p2p connection from ", q.remote(), ": ", problem);
    retire(std::move(q.fd()));
    return true;
  }
  settle(q);
  return true;
}

void SocketChannel::settle(Pending& q) {
  const auth::Verdict verdict = q.judge(config_.secret, challenge_);
  const bool told = net::send_verdict(q.fd().get(), verdict);
  if (verdict.status != auth::VerdictStatus::accepted || !told) {
    const std::string text = detail::concat(
        prefix(), "a p2p connection from ", q.remote(), " claiming rank ", q.hello().rank, " was ",
        told ? auth::refusal_text(verdict.status) : "dropped: it left at once");
    log_info(text);
    retire(std::move(q.fd()));
    if (verdict.status != auth::VerdictStatus::accepted) note_refusal(text);
    return;
  }
  Peer& p = peers_[static_cast<size_t>(q.hello().rank)];
  p.in = std::move(q.fd());
  p.in_state = Inbound::open;
  p.pid = q.hello().pid;
  p.host = net::host_of(q.hello());
  p.remote = q.remote();
  p.readable.store(true);  // the stream may have come with the hello
}

// Records refusals in the store for `lockstep doctor`: at most one store call a second (this
// runs under the engine's lock; a flood of refusals must not slow the job down).
void SocketChannel::note_refusal(const std::string& text) {
  ++unnoted_refusals_;
  const auto now = Clock::now();
  if (now - last_refusal_note_ < std::chrono::seconds(1)) return;
  last_refusal_note_ = now;
  note_refusals(*config_.store, std::exchange(unnoted_refusals_, 0), text);
}

void SocketChannel::accept_new() {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        log_warning(prefix(), "accepting p2p connections failed: ", net::errno_text(errno));
      return;
    }
    Pending q(net::Fd(fd), net::peer_address(fd), Clock::now() + kHelloGrace);
    if (!advance(q)) pending_.push_back(std::move(q));
  }
}

void SocketChannel::service() {
  std::lock_guard lock(mu_);  // nothing below blocks
  if (sleepers_ == 0) graveyard_.clear();
  std::vector<pollfd> fds;
  std::vector<int> who;  // the peer of each inbound entry
  if (listener_.valid()) fds.push_back({listener_.get(), POLLIN, 0});
  for (int i = 0; i < size_; ++i) {
    if (peers_[static_cast<size_t>(i)].in_state != Inbound::open) continue;
    fds.push_back({peers_[static_cast<size_t>(i)].in.get(), POLLIN, 0});
    who.push_back(i);
  }
  if (fds.empty() && pending_.empty()) return;
  int rc = fds.empty() ? 0 : ::poll(fds.data(), fds.size(), 0);
  if (rc < 0) return;  // EINTR: next round
  size_t first = listener_.valid() ? 1 : 0;
  // Only ever set here: read() clears it when a recv comes up short, so a concurrent sleep()'s
  // mark is never lost.
  for (size_t k = 0; k < who.size(); ++k)
    if (fds[first + k].revents != 0) peers_[static_cast<size_t>(who[k])].readable.store(true);
  // Newcomers: those pending first, then fresh ones (hellos arrive with the connection).
  std::erase_if(pending_, [&](Pending& q) { return advance(q); });
  if (first == 1 && fds[0].revents != 0) accept_new();
}

void SocketChannel::retire(net::Fd fd) {
  if (sleepers_ > 0) graveyard_.push_back(std::move(fd));
}

void SocketChannel::sleep(Clock::time_point until, std::span<const int> want_room) {
  std::vector<pollfd> fds;
  std::vector<int> who;  // per entry: the peer whose inbound socket it is, or -1
  bool now = false;
  {
    std::lock_guard lock(mu_);
    fds.push_back({wake_fd_.get(), POLLIN, 0});
    if (listener_.valid()) fds.push_back({listener_.get(), POLLIN, 0});
    for (Pending& q : pending_) fds.push_back({q.fd().get(), POLLIN, 0});
    who.assign(fds.size(), -1);
    for (int i = 0; i < size_; ++i) {
      const Peer& p = peers_[static_cast<size_t>(i)];
      // Bytes already known to be there are the caller's to read: waiting on them would spin
      // while it chooses not to (and an EOF stays readable forever).
      if (p.in_state != Inbound::open || p.readable.load()) continue;
      fds.push_back({p.in.get(), POLLIN, 0});
      who.push_back(i);
    }
    for (int r : want_room) {
      if (r < 0 || r >= size_) continue;
      const Peer& p = peers_[static_cast<size_t>(r)];
      if (!p.out_pollable)
        now = true;  // not connected yet (write connects) or failed: no wait
      else
        fds.push_back({p.out.get(), POLLOUT, 0});
    }
    ++sleepers_;
  }
  auto left = std::max(until - Clock::now(), Clock::duration::zero());
  if (!now && left > Clock::duration::zero()) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
    if (::ppoll(fds.data(), fds.size(), &ts, nullptr) > 0) {
      if (fds[0].revents != 0) {
        uint64_t count = 0;
        ssize_t r = ::read(wake_fd_.get(), &count, sizeof(count));
        (void)r;
      }
      for (size_t k = 0; k < who.size(); ++k)
        if (who[k] >= 0 && fds[k].revents != 0)
          peers_[static_cast<size_t>(who[k])].readable.store(true);
    }
  }
  std::lock_guard lock(mu_);
  if (--sleepers_ == 0) graveyard_.clear();
}

void SocketChannel::wake() {
  uint64_t one = 1;
  ssize_t r = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN only when the counter is full: a wake is pending anyway
}

void SocketChannel::close() {
  if (closed_) return;
  closed_ = true;
  try {
    config_.store->set(store_key(config_, "socket_closed", rank_), "1");
  } catch (const Error& e) {
    log_info(prefix(), "could not record the p2p close in the store: ", e.what());
  }
  std::lock_guard lock(mu_);
  for (int i = 0; i < size_; ++i) {
    Peer& p = peers_[static_cast<size_t>(i)];
    if (p.out.valid()) ::shutdown(p.out.get(), SHUT_WR);
  }
  retire(std::move(listener_));
  for (Pending& q : pending_) retire(std::move(q.fd()));
  pending_.clear();
}

}  // namespace lockstep::p2p
