#include "backends/tcp/mesh_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "lockstep/core/error.h"

namespace lockstep::tcp {

namespace {

// How long close() waits to hand its end of the stream to a socket that is full.
constexpr milliseconds kEndGrace{2000};

}  // namespace

MeshChannel::MeshChannel(std::shared_ptr<MeshLinks> links, const GroupConfig& config)
    : links_(std::move(links)),
      group_(config.name),
      rank_(config.rank),
      size_(config.size),
      peers_(std::make_unique<Peer[]>(static_cast<size_t>(config.size))) {
  LOCKSTEP_ENFORCE(links_ && links_->conns.size() == static_cast<size_t>(size_), InvalidArgument,
                   prefix(), "the mesh has no connection per rank for the p2p channel");
  wake_fd_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  LOCKSTEP_ENFORCE(wake_fd_.valid(), NetworkError, prefix(),
                   "eventfd failed: ", net::errno_text(errno));
  for (int i = 0; i < size_; ++i) {
    Peer& p = peers_[static_cast<size_t>(i)];
    p.conn = links_->conns[static_cast<size_t>(i)];
    if (!p.conn) continue;
    p.conn->attach_p2p(links_->transport_wake.get(), [this, i] {
      peers_[static_cast<size_t>(i)].readable.store(true);
      wake();
    });
  }
}

MeshChannel::~MeshChannel() {
  detach();
}

void MeshChannel::detach() {
  for (int i = 0; i < size_; ++i)
    if (auto& c = peers_[static_cast<size_t>(i)].conn) c->detach_p2p();
}

MeshChannel::Peer& MeshChannel::peer_of(int peer) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < size_ && peers_[static_cast<size_t>(peer)].conn,
                   InvalidArgument, prefix(), "peer ", peer,
                   " is not another rank of the group (size ", size_, ")");
  return peers_[static_cast<size_t>(peer)];
}

std::string MeshChannel::prefix() const {
  return detail::concat("group '", group_, "' rank ", rank_, ": ");
}

std::string MeshChannel::describe(int peer) const {
  const PeerInfo& info = peers_[static_cast<size_t>(peer)].conn->peer();
  std::string where;
  if (info.pid > 0) where = detail::concat("pid ", info.pid, " on ", info.host);
  if (!info.address.empty()) where += (where.empty() ? "" : ", ") + info.address;
  return detail::concat("rank ", peer, where.empty() ? "" : " (" + where + ")");
}

size_t MeshChannel::write(int peer, const std::byte* data, size_t bytes, Deadline /*deadline*/) {
  Peer& p = peer_of(peer);
  if (!p.write_error.empty()) throw NetworkError(prefix() + p.write_error);
  LOCKSTEP_ENFORCE(!closed_, InvalidArgument, prefix(), "write to rank ", peer,
                   " after the channel was closed");
  if (bytes == 0) return 0;
  try {
    return p.conn->p2p_write(data, bytes);
  } catch (const PeerEvent& e) {
    const int err = e.error;
    p.write_error =
        p.conn->p2p_state().shut_here
            ? detail::concat("this rank's collectives failed, which ended its connection to ",
                             describe(peer))
        : (err == EPIPE || err == ECONNRESET)
            ? detail::concat("the connection to ", describe(peer), " was reset (its process died?)")
        : net::is_unreachable(err)
            ? detail::concat("sending to ", describe(peer), " failed: ", net::unreachable_text(err))
            : detail::concat("sending to ", describe(peer), " failed: ", net::errno_text(err));
    throw NetworkError(prefix() + p.write_error);
  }
}

size_t MeshChannel::read(int peer, std::byte* data, size_t bytes) {
  Peer& p = peer_of(peer);
  bool drained = false;
  const size_t n = p.conn->p2p_read(data, bytes, p.readable.load(), !idle_.load(), drained);
  if (drained) p.readable.store(false);
  return n;
}

std::string MeshChannel::broken(int peer) {
  Peer& p = peer_of(peer);
  if (!p.why.empty()) return p.why;
  const P2PStreamState st = p.conn->p2p_state();
  if (st.unread || p.conn->p2p_read_blocked()) return "";
  if (st.ended) {
    p.why = detail::concat("rank ", peer, " closed its end of the stream");
  } else if (st.garbage) {
    p.why = detail::concat(describe(peer),
                           " sent bytes that are not lockstep frames: the connection is corrupt");
  } else if (st.aborted && st.closed) {
    p.why = detail::concat(describe(peer),
                           " aborted the group: its collectives failed (see its own error)");
  } else if (st.shut_here) {
    p.why = detail::concat("this rank's collectives failed, which ended its connection to ",
                           describe(peer));
  } else if (st.error != 0 && net::is_unreachable(st.error)) {
    p.why = detail::concat("the connection to ", describe(peer),
                           " failed: ", net::unreachable_text(st.error));
  } else if (st.error != 0) {
    p.why = detail::concat("the connection to ", describe(peer), " was reset (",
                           net::errno_text(st.error), "; its process died?)");
  } else if (st.closed) {
    p.why = detail::concat(describe(peer),
                           " died: its stream ended without an orderly close (the process exited "
                           "or was killed)");
  } else if (!p.write_error.empty()) {
    p.why = p.write_error;
  }
  return p.why;
}

void MeshChannel::service() {
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (int i = 0; i < size_; ++i) {
    Peer& p = peers_[static_cast<size_t>(i)];
    if (!p.conn) continue;
    if (p.write_error.empty()) {
      try {
        p.conn->flush_tail();
      } catch (const PeerEvent&) {
        // the next write or broken() says what happened
      }
    }
    if (p.readable.load() || p.conn->p2p_read_blocked() || p.conn->p2p_state().closed ||
        (idle_.load() && p.conn->p2p_collective_at_head()))
      continue;
    fds.push_back({p.conn->fd(), POLLIN, 0});
    who.push_back(i);
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
  for (size_t k = 0; k < fds.size(); ++k)
    if (fds[k].revents != 0) peers_[static_cast<size_t>(who[k])].readable.store(true);
}

void MeshChannel::wait(Clock::time_point until, std::span<const int> want_room, bool idle) {
  idle_.store(idle);
  std::vector<pollfd> fds{{wake_fd_.get(), POLLIN, 0}};
  std::vector<int> who{-1};  // per entry: the peer whose socket's input it watches, or -1
  for (int i = 0; i < size_; ++i) {
    Peer& p = peers_[static_cast<size_t>(i)];
    if (!p.conn) continue;
    short events = 0;
    // Bytes known to be there are the caller's to read (waiting on them would spin), an ended
    // socket stays readable forever, a blocked one waits for the collectives' wake, and while
    // idle a collective frame at the head is the collectives' to read.
    if (!p.readable.load() && !p.conn->p2p_read_blocked() && !p.conn->p2p_state().closed &&
        !(idle && p.conn->p2p_collective_at_head()))
      events |= POLLIN;
    if (p.conn->tail_pending()) events |= POLLOUT;
    if (events == 0) continue;
    fds.push_back({p.conn->fd(), events, 0});
    who.push_back((events & POLLIN) ? i : -1);
  }
  for (int r : want_room) {
    if (r < 0 || r >= size_ || !peers_[static_cast<size_t>(r)].conn) continue;
    const auto& c = peers_[static_cast<size_t>(r)].conn;
    if (c->p2p_write_blocked()) continue;  // a collective frame goes first: its end wakes us
    fds.push_back({c->fd(), POLLOUT, 0});
    who.push_back(-1);
  }
  auto left = std::max(until - Clock::now(), Clock::duration::zero());
  if (left <= Clock::duration::zero()) return;
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  timespec ts{.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
  if (::ppoll(fds.data(), fds.size(), &ts, nullptr) <= 0) return;
  if (fds[0].revents != 0) {
    uint64_t count = 0;
    ssize_t r = ::read(wake_fd_.get(), &count, sizeof(count));
    (void)r;
  }
  for (size_t k = 1; k < fds.size(); ++k)
    if (who[k] >= 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0)
      peers_[static_cast<size_t>(who[k])].readable.store(true);
}

void MeshChannel::sleep(Clock::time_point until, std::span<const int> want_room) {
  wait(until, want_room, false);
}

void MeshChannel::sleep_idle(Clock::time_point until) {
  wait(until, {}, true);
}

void MeshChannel::wake() {
  idle_.store(false);
  uint64_t one = 1;
  ssize_t r = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN only when the counter is full: a wake is pending anyway
}

void MeshChannel::close() {
  if (closed_) return;
  closed_ = true;
  const Deadline deadline = Deadline::after(kEndGrace);
  for (int i = 0; i < size_; ++i) {
    Peer& p = peers_[static_cast<size_t>(i)];
    if (!p.conn || !p.write_error.empty()) continue;
    while (!p.conn->p2p_write_end() && !deadline.expired()) {
      if (p.conn->p2p_write_blocked()) {  // a collective frame is on its way out
        std::this_thread::sleep_for(milliseconds(1));
        continue;
      }
      pollfd out{p.conn->fd(), POLLOUT, 0};
      ::poll(&out, 1, deadline.poll_ms(10));
    }
  }
  detach();
}

std::unique_ptr<p2p::Channel> make_mesh_channel(const GroupConfig& config, const Backend& backend) {
  auto links = std::dynamic_pointer_cast<MeshLinks>(backend.peer_links());
  LOCKSTEP_ENFORCE(links, InvalidArgument, "group '", config.name, "': backend ", backend.name(),
                   " shares no mesh connections with its p2p channel");
  return std::make_unique<MeshChannel>(std::move(links), config);
}

}  // namespace lockstep::tcp
