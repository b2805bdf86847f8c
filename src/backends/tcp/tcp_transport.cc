#include "backends/tcp/tcp_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backends/tcp/peer_errors.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::tcp {

namespace {

constexpr short kCloseEvents = POLLRDHUP | POLLHUP | POLLERR;
// [Early frames] are looked for once an op has waited this long: an op that is only slow pays
// nothing on its fast path, and an order mismatch is a hang otherwise.
constexpr milliseconds kEarlyFramesAfter{50};
// How long a rank that saw a peer vanish looks for the reason another rank left in the store.
constexpr milliseconds kAbortNoteWait{150};

}  // namespace

TcpTransport::TcpTransport(std::vector<std::unique_ptr<Connection>> conns,
                           TransportIdentity identity)
    : links_(std::make_shared<MeshLinks>()), conns_(links_->conns), id_(std::move(identity)) {
  for (auto& c : conns) conns_.emplace_back(std::move(c));
  links_->transport_wake = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  LOCKSTEP_ENFORCE(links_->transport_wake.valid(), NetworkError, "group '", id_.group, "' rank ",
                   id_.rank, ": eventfd failed: ", net::errno_text(errno));
}

void TcpTransport::begin_op(const Op& op) {
  op_ = &op;
  polled_this_op_ = false;
  received_this_op_ = false;
  op_started_ = Clock::now();
  expected_ = data_header(op, 0);
  finished_.clear();
  outstanding_ = 0;
}

void TcpTransport::end_op() {
  op_ = nullptr;
  finished_.clear();
  outstanding_ = 0;
}

void TcpTransport::finish_op() {
  if (!polled_this_op_ && received_this_op_) {
    pollfds_.clear();
    polled_.clear();
    for (auto& c : conns_) {
      if (!c || !c->open()) continue;
      pollfds_.push_back({c->fd(), POLLRDHUP, 0});
      polled_.push_back(c.get());
    }
    if (!pollfds_.empty() && ::poll(pollfds_.data(), pollfds_.size(), 0) > 0)
      for (size_t i = 0; i < pollfds_.size(); ++i) {
        Connection& c = *polled_[i];
        if ((pollfds_[i].revents & kCloseEvents) == 0 || c.has_recvs()) continue;
        // Only a peer that failed in this very op fails it: one that died, left or failed after
        // its part of it leaves this rank's result whole, and the next op that needs the peer
        // reports it (the bytes it left stay in the inbox).
        auto e = c.inspect_close();
        if (e && e->kind == PeerEvent::aborted && e->failed_seq == op_->seq) fail(c, *e);
      }
  }
  end_op();
}

std::string TcpTransport::op_name() const {
  return op_ ? op_->name() : "setup";
}

std::string TcpTransport::peer_text(const PeerInfo& p) const {
  std::string s = detail::concat("rank ", p.rank, " (host ", p.host);
  if (p.pid > 0) s += detail::concat(", pid ", p.pid);
  return s + ")";
}

Connection& TcpTransport::conn(int peer, const char* what) {
  if (peer < 0 || peer >= id_.size || peer == id_.rank || !conns_[static_cast<size_t>(peer)])
    throw InvalidArgument(detail::concat(op_name(), ": ", what, " to/from rank ", peer, " on rank ",
                                         id_.rank, " (group of ", id_.size, ")"));
  return *conns_[static_cast<size_t>(peer)];
}

Transport::Request TcpTransport::post_send(int peer, const void* data, size_t bytes) {
  Connection& c = conn(peer, "post_send");
  Request id = finished_.size();
  finished_.push_back(0);
  ++outstanding_;
  MessageHeader h = expected_;
  h.payload_bytes = bytes;
  c.queue_send(h, data, id);
  if (c.pending_sends() == 1) {  // the socket is probably writable: skip a poll round
    done_.clear();
    try {
      c.pump_send(done_);
    } catch (const PeerEvent& e) {
      fail(c, e);
    }
    complete(done_);
  }
  return id;
}

Transport::Request TcpTransport::post_recv(int peer, void* data, size_t bytes) {
  Connection& c = conn(peer, "post_recv");
  received_this_op_ = true;
  Request id = finished_.size();
  finished_.push_back(0);
  ++outstanding_;
  c.queue_recv(data, bytes, id);
  return id;
}

void TcpTransport::wait(Request r) {
  while (!finished_.at(r)) progress();
}

void TcpTransport::wait_all() {
  while (outstanding_ > 0) progress();
}

void TcpTransport::complete(const std::vector<Request>& ids) {
  for (Request id : ids) {
    if (id < finished_.size() && !finished_[id]) {
      finished_[id] = 1;
      --outstanding_;
    }
  }
}

void TcpTransport::check_header(const Connection& c, const MessageHeader& got,
                                uint64_t expected_bytes) const {
  MessageHeader want = expected_;
  want.payload_bytes = expected_bytes;
  if (std::memcmp(&got, &want, sizeof(MessageHeader)) == 0) return;
  if (auto text = header_mismatch(got, expected_bytes,
                                  {.op = *op_, .rank = id_.rank, .peer = c.peer().rank}))
    throw MismatchError(*text);
}

// Receives whose bytes need no poll: read ahead into a connection's inbox, or left behind by a
// peer that closed after its goodbye (then its sends fail). Returns whether anything completed.
bool TcpTransport::pump_buffered() {
  const size_t before = outstanding_;
  for (auto& c : conns_) {
    if (!c) continue;
    const bool closed = !c->open();
    if (!(c->has_recvs() && (c->has_buffered_input() || closed)) && !(closed && c->has_sends()))
      continue;
    done_.clear();
    try {
      if (c->has_recvs())
        c->pump_recv(done_, [&](const MessageHeader& h, uint64_t n) { check_header(*c, h, n); });
      if (closed && c->has_sends()) c->pump_send(done_);
    } catch (const PeerEvent& e) {
      fail(*c, e);
    }
    complete(done_);
  }
  return outstanding_ != before;
}

void TcpTransport::progress() {
  if (op_ && op_->deadline.expired()) fail_timeout();
  if (pump_buffered()) return;
  pollfds_.clear();
  polled_.clear();
  const bool early_frames = op_ && Clock::now() - op_started_ >= kEarlyFramesAfter;
  for (auto& c : conns_) {
    if (!c || !c->open()) continue;
    short events = POLLRDHUP;
    // A peer this rank does not read from now: its next header is peeked ([Early frames]).
    if (c->has_recvs() || (early_frames && !c->header_buffered())) events |= POLLIN;
    if (c->has_sends()) events |= POLLOUT;
    pollfds_.push_back({c->fd(), events, 0});
    polled_.push_back(c.get());
  }
  // The p2p side took bytes of ours off a socket ([Threads] in connection.h).
  pollfds_.push_back({links_->transport_wake.get(), POLLIN, 0});
  polled_.push_back(nullptr);
  // Blocks at once: spinning first (poll with no timeout for ~20-200 us) measured no better on
  // loopback and takes the core from the peer when ranks outnumber cores.
  // Until early frames are looked for, wake when they are to be.
  const int cap_ms = op_ && !early_frames ? static_cast<int>(kEarlyFramesAfter.count()) : 1 << 30;
  int rc = ::poll(pollfds_.data(), pollfds_.size(), op_ ? op_->deadline.poll_ms(cap_ms) : 1000);
  polled_this_op_ = true;
  if (rc < 0) {
    if (errno == EINTR) return;
    throw NetworkError(op_name() + ": poll failed: " + net::errno_text(errno));
  }
  for (size_t i = 0; i < pollfds_.size() && rc > 0; ++i) {
    if (pollfds_[i].revents == 0) continue;
    --rc;
    if (!polled_[i]) {
      uint64_t count = 0;
      ssize_t r = ::read(links_->transport_wake.get(), &count, sizeof count);
      (void)r;  // pump_buffered, next round, takes what it was about
      continue;
    }
    service(*polled_[i], pollfds_[i].revents);
  }
}

void TcpTransport::service(Connection& c, short revents) {
  done_.clear();
  try {
    if ((revents & (POLLIN | kCloseEvents)) && c.has_recvs())
      c.pump_recv(done_, [&](const MessageHeader& h, uint64_t n) { check_header(c, h, n); });
    if ((revents & POLLIN) && !c.has_recvs()) check_early_frame(c);
    if ((revents & (POLLOUT | kCloseEvents)) && c.has_sends()) c.pump_send(done_);
  } catch (const PeerEvent& e) {
    fail(c, e);
  }
  // What completed counts first: a peer that closed after the op's last message from it (its
  // close seen in the same poll) leaves the op done, not failed.
  complete(done_);
  if ((revents & kCloseEvents) && !c.has_recvs() && c.open() && outstanding_ > 0) check_closed(c);
}

void TcpTransport::check_closed(Connection& c) {
  if (auto e = c.inspect_close()) on_close_event(c, *e);  // inspect_close never throws
}

void TcpTransport::check_early_frame(Connection& c) const {
  auto h = c.peek_header();
  // A side exchange (kSideExchangeTag: the DETAIL fingerprint exchange, an all_gather under the
  // op's number) is in another kind legitimately.
  if (!h || !op_ || is_p2p(op_->kind) || is_p2p(h->kind) || h->tag != 0 || op_->tag != 0 ||
      h->seq != op_->seq || h->kind == op_->kind)
    return;
  if (auto text = header_mismatch(*h, h->payload_bytes,
                                  {.op = *op_, .rank = id_.rank, .peer = c.peer().rank}))
    throw MismatchError(*text);
}

// A peer's stream ended while this rank was not reading from it.
void TcpTransport::on_close_event(Connection& c, const PeerEvent& e) {
  if (e.kind == PeerEvent::goodbye && !c.has_sends()) return;  // orderly: fine unless needed later
  fail(c, e);
}

void TcpTransport::fail(Connection& c, const PeerEvent& e) const {
  // A failed send or a reset may hide the peer's abort frame in the bytes not yet read: prefer
  // the reason it gives.
  if ((e.kind == PeerEvent::reset || e.kind == PeerEvent::closed) && c.open() &&
      c.at_frame_boundary()) {
    auto inspected = c.inspect_close();
    if (inspected && inspected->kind == PeerEvent::aborted) throw_failure(c, *inspected);
  }
  throw_failure(c, e);
}

void TcpTransport::throw_failure(const Connection& c, const PeerEvent& e) const {
  PeerFailure f{.op_name = op_name(),
                .rank = id_.rank,
                .peer = peer_text(c.peer()),
                .peer_rank = c.peer().rank,
                .peer_host = c.peer().host};
  for (const auto& other : conns_)
    if (other && other->peer().host == f.peer_host) f.peer_host_ranks.push_back(other->peer().rank);
  if (e.kind == PeerEvent::reset && net::is_unreachable(e.error)) {
    std::lock_guard<std::mutex> lock(unreachable_mu_);
    unreachable_ = f.peer_host_ranks;
  }
  if ((e.kind == PeerEvent::closed || e.kind == PeerEvent::reset) && id_.store)
    f.abort_note = read_abort_note(*id_.store, id_.group, kAbortNoteWait);
  throw_peer_failure(f, e);
}

std::vector<int> TcpTransport::unreachable_ranks() const {
  std::lock_guard<std::mutex> lock(unreachable_mu_);
  return unreachable_;
}

void TcpTransport::fail_timeout() const {
  std::string waiting, sending;
  for (const auto& c : conns_) {
    if (!c) continue;
    if (c->has_recvs())
      waiting += detail::concat(waiting.empty() ? "" : ", ", peer_text(c->peer()), " (",
                                c->pending_recvs(), " message(s))");
    if (c->has_sends()) sending += (sending.empty() ? "" : ", ") + peer_text(c->peer());
  }
  auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - op_started_);
  std::string s = detail::concat(op_->describe(), " timed out on rank ", id_.rank, " after ",
                                 elapsed.count(), " ms");
  if (!waiting.empty()) s += "; still waiting for data from " + waiting;
  if (!sending.empty()) s += "; still sending to " + sending + " (not reading)";
  s += ". A rank that never entered this op, or is stuck before it, causes this: check the other "
       "ranks' output. If the op is merely slow, raise its timeout (or LOCKSTEP_TIMEOUT)";
  throw TimeoutError(s);
}

void TcpTransport::abort(ErrorClass error_class, const std::string& reason) {
  for (auto& c : conns_) {
    if (!c || !c->open()) continue;
    if (c->clear_queues())
      c->try_send_control(FrameType::abort, error_class, reason,
                          op_ ? std::optional<uint64_t>(op_->seq) : std::nullopt);
    c->shutdown_write();
  }
  end_op();
}

void TcpTransport::goodbye(Deadline deadline) {
  std::vector<Connection*> reading, writing;
  for (auto& c : conns_) {
    if (!c) continue;
    c->clear_queues();
    if (c->open()) c->queue_send(control_header(FrameType::bye, 0), nullptr, 0);
    reading.push_back(c.get());
    if (c->open()) writing.push_back(c.get());
  }
  while (!deadline.expired()) {
    std::erase_if(writing, [&](Connection* c) {
      try {
        done_.clear();
        c->pump_send(done_);
        return !c->has_sends();
      } catch (const PeerEvent&) {
        return true;
      }
    });
    std::erase_if(reading, [](Connection* c) { return c->discard_until_goodbye(); });
    if (reading.empty() && writing.empty()) break;
    pollfds_.clear();
    for (Connection* c : reading)
      if (c->open()) pollfds_.push_back({c->fd(), POLLIN, 0});
    for (Connection* c : writing) pollfds_.push_back({c->fd(), POLLOUT, 0});
    if (::poll(pollfds_.data(), pollfds_.size(), deadline.poll_ms(100)) < 0 && errno != EINTR)
      break;
  }
  for (auto& c : conns_)
    if (c) c->close();
}

}  // namespace lockstep::tcp
