// Agent's pool (agent.h): threads that wait on the poller, read a connection when it has bytes,
// complete the calls its answers belong to, and run the calls it brought, strand by strand.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <unistd.h>

#include <cerrno>

#include "core/log.h"
#include "rpc/agent.h"
#include "rpc/agent_detail.h"
#include "rpc/codec.h"

namespace lockstep::rpc {

namespace {

// Answers a call on the connection it came by.
class ConnectionResponder : public Responder {
 public:
  ConnectionResponder(std::weak_ptr<Connection> conn, uint64_t call_id,
                      std::chrono::milliseconds timeout)
      : conn_(std::move(conn)), call_id_(call_id), timeout_(timeout) {}
  ~ConnectionResponder() override {
    if (!answered())
      error({.code = ErrorCode::remote_exception,
             .type = "lockstep.rpc.Unanswered",
             .message = "the function's future was destroyed without a value or an error"});
  }

 protected:
  void send(bool ok, Message message) override {
    auto conn = conn_.lock();
    if (!conn) return;  // the caller has gone; so has its call
    try {
      int err = conn->send(ok ? FrameKind::reply : FrameKind::error, call_id_, 0, message,
                           Deadline::after(timeout_));
      if (err) ::shutdown(conn->fd.get(), SHUT_RDWR);  // the reader sees the end and cleans up
    } catch (const CodecError& e) {                    // a result past the frame's bounds
      if (ok) {
        ErrorBody b{.code = ErrorCode::remote_exception, .type = "CodecError", .message = e.what()};
        conn->send(FrameKind::error, call_id_, 0, encode_error(b), Deadline::after(timeout_));
      }
    }
  }

 private:
  std::weak_ptr<Connection> conn_;
  uint64_t call_id_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

void Agent::serve_loop() {
  epoll_event ev{};
  for (;;) {
    idle_.fetch_add(1);
    int n = ::epoll_wait(epoll_.get(), &ev, 1, -1);
    idle_.fetch_sub(1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log_warning("rpc: the poller failed (", net::errno_text(errno), "); a thread stops");
      return;
    }
    if (n == 0) continue;
    if (ev.data.u64 == kWakeId) return;
    if (ev.data.u64 == kKickId) {
      run_handed_off();
      continue;
    }
    if (ev.data.u64 == kListenerId) {
      accept_all();
      continue;
    }
    if (auto conn = find_connection(ev.data.u64)) on_event(conn);
  }
}

void Agent::spawn_thread() {
  ++threads_;
  auto exited = std::make_shared<std::atomic<bool>>(false);
  pool_.push_back({std::thread([self = shared_from_this(), exited] {
                     self->serve_loop();
                     --self->threads_;
                     *exited = true;
                     self->pool_cv_.notify_all();
                   }),
                   exited});
}

void Agent::maybe_grow() {
  if (idle_.load() > 0) return;
  std::lock_guard lock(pool_mu_);
  if (pool_closed_ || threads_.load() >= options_.max_threads) return;
  spawn_thread();
}

void Agent::hand_off(const std::shared_ptr<Connection>& conn, uint32_t lane) {
  {
    std::lock_guard lock(ready_mu_);
    ready_.emplace_back(conn, lane);
  }
  uint64_t one = 1;
  if (::write(kick_.get(), &one, sizeof one) < 0) {  // cannot fail on a fresh eventfd: run it here
    run_strand(conn, lane);
    return;
  }
  maybe_grow();
}

void Agent::run_handed_off() {
  uint64_t n;
  if (::read(kick_.get(), &n, sizeof n) != sizeof n) return;  // another thread took it
  std::pair<std::weak_ptr<Connection>, uint32_t> item;
  {
    std::lock_guard lock(ready_mu_);
    if (ready_.empty()) return;
    item = std::move(ready_.front());
    ready_.pop_front();
  }
  if (auto conn = item.first.lock()) run_strand(conn, item.second);
}

void Agent::accept_all() {
  for (;;) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        log_warning("rpc: accepting a connection failed: ", net::errno_text(errno));
      break;
    }
    net::Fd owned(fd);
    net::tune_tcp(fd, 0);
    auto conn = std::make_shared<Connection>(Connection::Side::incoming, std::move(owned),
                                             next_conn_id_.fetch_add(1), -1);
    conn->handshake_until = Clock::now() + std::chrono::seconds(10);
    conn->handshake =
        std::make_unique<ServerHandshake>(net::peer_address(fd), conn->handshake_until);
    add_connection(conn);
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = kListenerId;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
}

void Agent::on_handshake(const std::shared_ptr<Connection>& conn) {
  ServerHandshake& h = *conn->handshake;
  switch (h.advance(conn->fd.get(), endpoint_, secret_)) {
    case ServerHandshake::State::working:
      arm(*conn);
      return;
    case ServerHandshake::State::dropped:
      if (!h.silent())
        log_warning("rpc: refused a connection from ", h.remote(), ": ", h.problem());
      drop_connection(conn);
      return;
    case ServerHandshake::State::done:
      conn->peer = h.peer_rank();
      conn->handshake.reset();
      conn->established = true;
      arm(*conn);
      return;
  }
}

void Agent::on_event(const std::shared_ptr<Connection>& conn) {
  if (!conn->established.load()) {
    on_handshake(conn);
    return;
  }
  std::unique_lock reading(conn->read_mu, std::try_to_lock);
  if (!reading) return;  // a caller is reading it (wait_reading); it re-arms when it is done
  Batch batch = read_batch(conn);
  reading.unlock();
  finish_batch(conn, batch);
}

Agent::Batch Agent::read_batch(const std::shared_ptr<Connection>& conn) {
  Batch b;
  try {
    b.status = conn->reader.read_from(conn->fd.get(), b.frames);
  } catch (const CodecError& e) {
    b.garbage = e.what();
  } catch (const std::bad_alloc&) {
    b.garbage = "a frame too large for this process's memory";
  }
  const bool incoming = conn->side == Connection::Side::incoming;
  for (Frame& f : b.frames) {
    switch (f.header.kind) {
      case FrameKind::request: {
        if (!incoming) {
          b.garbage = "a call on a connection that carries answers";
          break;
        }
        // Queued while the connection is still held, so that a lane's calls keep their order.
        const uint32_t lane = f.header.lane;
        std::lock_guard lock(conn->mu);
        Strand& s = conn->strands[lane];
        s.queue.push_back(std::move(f));
        if (!s.running) {
          s.running = true;
          b.lanes.push_back(lane);
        }
        break;
      }
      case FrameKind::reply:
      case FrameKind::error:
        if (incoming)
          b.garbage = "an answer on a connection that carries calls";
        else
          b.answers.push_back(&f);
        break;
      case FrameKind::goodbye: {
        std::lock_guard lock(conn->mu);
        conn->goodbye = true;
        break;
      }
    }
  }
  return b;
}

void Agent::finish_batch(const std::shared_ptr<Connection>& conn, Batch& b) {
  const bool open = b.garbage.empty() && b.status == FrameReader::Status::more;
  if (open) arm(*conn);  // another thread may read on while this one completes and runs
  for (Frame* f : b.answers) complete(conn, *f);
  if (!b.garbage.empty()) {
    const int rank = conn->peer.load();
    log_warning("rpc: ", rank >= 0 ? describe(worker(rank)) : std::string("a peer"),
                " sent what lockstep rpc cannot read (", b.garbage, "); closing that connection");
    end_connection(conn, EPROTO, "it sent a malformed frame");
  } else if (!open) {
    end_connection(conn, conn->reader.error(),
                   b.status == FrameReader::Status::closed
                       ? (conn->reader.error() ? "closed in the middle of a message" : "closed")
                       : "a read failed");
  }
  // The first lane runs here; the others on other threads, side by side.
  for (size_t i = 1; i < b.lanes.size(); ++i) hand_off(conn, b.lanes[i]);
  if (!b.lanes.empty()) run_strand(conn, b.lanes[0]);
}

// How long a synchronous caller keeps looking at its socket before it sleeps in poll: an answer
// that is nearly there is then read at once, instead of after waking a sleeping CPU (tens of
// microseconds on a VM). Bounded in time, so that on a busy machine a caller gives up its CPU
// after at most this much, once per call: no spinning that grows with the load.
constexpr auto kSpin = std::chrono::microseconds(50);

void Agent::wait_reading(const std::shared_ptr<Connection>& conn,
                         const std::shared_ptr<internal::FutureState>& state) {
  for (;;) {
    {
      std::unique_lock lock(state->mu);
      if (state->done) return;
    }
    std::unique_lock reading(conn->read_mu, std::try_to_lock);
    bool ended;
    {
      std::lock_guard lock(conn->mu);
      ended = conn->ended;
    }
    if (!reading || ended) {  // a pool thread reads it: it completes the call
      if (reading) reading.unlock();
      std::unique_lock lock(state->mu);
      state->cv.wait_for(lock, std::chrono::milliseconds(ended ? 100 : 1),
                         [&] { return state->done; });
      continue;
    }
    // Wait for the answer on the socket itself: no hand-off from a pool thread. Bounded, so that
    // a timeout or an end that another thread finds is seen soon.
    pollfd p{conn->fd.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, 0);
    for (const auto until = Clock::now() + kSpin; ready == 0 && Clock::now() < until;)
      ready = ::poll(&p, 1, 0);
    if (ready == 0) ready = ::poll(&p, 1, 5);
    if (ready <= 0) {
      reading.unlock();
      arm(*conn);
      continue;
    }
    Batch batch = read_batch(conn);
    reading.unlock();
    finish_batch(conn, batch);
  }
}

void Agent::complete(const std::shared_ptr<Connection>& conn, Frame& frame) {
  std::optional<PendingCall> call = take_pending(conn, frame.header.call_id);
  if (!call) return;  // answered after its timeout: nobody waits
  if (frame.header.kind == FrameKind::reply) {
    call->state->complete_reply(call->state, std::move(frame.message));
    return;
  }
  ErrorBody body;
  try {
    body = decode_error(frame.message);
  } catch (const CodecError& e) {
    body = ErrorBody{.code = ErrorCode::malformed, .message = e.what()};
  }
  call->state->complete_error(call->state,
                              to_exception(body, worker(conn->peer.load()), call->what));
}

void Agent::run_strand(const std::shared_ptr<Connection>& conn, uint32_t lane) {
  for (;;) {
    Frame f;
    {
      std::lock_guard lock(conn->mu);
      auto it = conn->strands.find(lane);
      if (it == conn->strands.end()) return;
      if (it->second.queue.empty()) {
        conn->strands.erase(it);
        return;
      }
      f = std::move(it->second.queue.front());
      it->second.queue.pop_front();
    }
    maybe_grow();
    dispatch(conn, f);
  }
}

void Agent::dispatch(const std::shared_ptr<Connection>& conn, Frame& frame) {
  auto responder =
      std::make_shared<ConnectionResponder>(conn, frame.header.call_id, options_.rpc_timeout);
  std::string target;
  std::optional<std::string> object;
  size_t args_offset = 0;
  try {
    Reader r(frame.message);
    target = r.str();
    if (r.peek() == Tag::none)
      r.none();
    else
      object = r.str();
    args_offset = r.offset();
  } catch (const CodecError& e) {
    responder->error({.code = ErrorCode::malformed, .message = e.what()});
    return;
  }
  if (state_.load() == State::closed) {
    responder->error({.code = ErrorCode::shutting_down});
    return;
  }
  ErrorBody missing;
  Handler handler = registry_->find(target, object ? &*object : nullptr, missing);
  if (!handler) {
    responder->error(std::move(missing));
    return;
  }
  const WorkerInfo& caller = worker(conn->peer.load());
  t_in_handler = true;
  t_caller = &caller;
  try {
    handler(Request{caller, frame.message, args_offset}, responder);
  } catch (const std::exception& e) {
    responder->error({.code = ErrorCode::remote_exception, .type = "error", .message = e.what()});
  }
  t_in_handler = false;
  t_caller = nullptr;
}

}  // namespace lockstep::rpc
