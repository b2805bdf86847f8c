// The p2p engine: posting, the progress loop, completion and closing (see engine.h).
#include "p2p/engine.h"

#include <algorithm>
#include <cstring>

#include "core/coarse_clock.h"
#include "core/log.h"
#include "lockstep/core/error.h"
#include "p2p/engine_state.h"

namespace lockstep::p2p {

namespace {

// The engine thread sleeps at most this long, so that deadlines and dead peers are seen in time.
constexpr std::chrono::milliseconds kMaxSleep{100};
// How long a waiter drives progress itself before it blocks, and how long the engine thread naps
// while a waiter does.
constexpr std::chrono::microseconds kPollBudget{200};
// Frames up to this size (header and payload) are written with one Channel::write.
constexpr size_t kCoalesceBytes = 512;
// A waiter's poll loop runs a progress round at least every this many rounds, even when the
// channel has nothing unread.
constexpr unsigned kIdleRounds = 32;
// After a waiter polled, the engine thread naps rather than sleeping in the channel for this long:
// a program that waits for message after message (a ping-pong, a pipeline) keeps its peers from
// waking this thread, which would race the next waiter for the lock. Read on the cheap clock
// (coarse_now), so at least its lag.
constexpr std::chrono::milliseconds kRecentPoll{2 * kCoarseClockLag};
// How long the engine thread naps at a time meanwhile.
constexpr std::chrono::milliseconds kNap{2};

// A frame of at most kCoalesceBytes as one buffer: its header, then `bytes` of payload.
struct JoinedFrame {
  JoinedFrame(const FrameHeader& h, const void* payload, size_t bytes) : size(sizeof h + bytes) {
    std::memcpy(data, &h, sizeof h);
    if (bytes > 0) std::memcpy(data + sizeof h, payload, bytes);
  }
  std::byte data[kCoalesceBytes];
  size_t size;
};

// The header announcing a send's message: eager up to kEagerBytes, else rts.
FrameHeader message_header(const Request& r, uint64_t id, uint64_t bytes) {
  FrameHeader h;
  h.kind = bytes <= kEagerBytes ? FrameKind::eager : FrameKind::rts;
  h.tag = r.tag;
  h.dtype = static_cast<uint8_t>(r.dtype);
  h.id = id;
  h.count = r.count;
  h.bytes = bytes;
  return h;
}

int64_t coarse_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(coarse_now().time_since_epoch())
      .count();
}

}  // namespace

std::string rank_text(int rank) {
  return "rank " + std::to_string(rank);
}

Engine::State::State(std::unique_ptr<Channel> c, const GroupConfig& config, OpJournal* j)
    : channel(std::move(c)),
      journal(j),
      lends_frames(channel->lends_bytes()),
      rank(config.rank),
      size(config.size),
      group(config.name),
      host(host_name_of(config)),
      peers(static_cast<size_t>(config.size)) {}

Engine::Engine(std::unique_ptr<Channel> channel, const GroupConfig& config, OpJournal* journal)
    : state_(std::make_shared<State>(std::move(channel), config, journal)) {
  state_->thread = std::thread([s = state_.get()] { s->loop(); });
}

Engine::~Engine() {
  close(detail::concat("rank ", state_->rank,
                       " destroyed its process group while this op was "
                       "pending"),
        detail::concat("rank ", state_->rank, " destroyed its process group"),
        Deadline::after(std::chrono::seconds(2)));
}

WorkPtr Engine::post(std::span<Request> requests, Deadline deadline,
                     detail::Description description) {
  if (requests.size() == 1 && requests[0].is_send && send_now_fits(requests[0])) {
    // Its handle first: allocating right after the write would wait for the peer's core to take
    // the written lines (the allocator's atomics drain the store buffer), and that wait would
    // delay what this rank does next, such as posting the recv of the reply.
    WorkPtr done = detail::WorkAccess::make_completed(description);
    if (state_->send_now(requests[0], deadline)) {
      // Ended as posted: this call took well under a tick of the coarse clock.
      state_->journal_end(requests[0], true, requests[0].posted);
      return done;
    }
  }
  auto [work, completion] =
      detail::WorkAccess::make(std::move(description), std::weak_ptr<detail::WaitPoller>(state_));
  auto batch = std::make_shared<Batch>();
  batch->work = completion;
  batch->deadline = deadline;
  batch->posted = coarse_now();
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.release_retired();
  if (s.closed) {
    lock.unlock();
    detail::WorkAccess::complete(
        completion, std::make_exception_ptr(InvalidArgument(
                        work->description() + ": the group's point-to-point engine is closed")));
    return work;
  }
  for (Request& r : requests) {
    auto op = std::make_shared<PendingOp>();
    op->bytes = r.count * element_size(r.dtype);
    op->request = std::move(r);
    op->batch = batch;
    batch->ops.push_back(op);
  }
  batch->remaining = batch->ops.size();
  if (batch->remaining == 0) {
    s.finished.push_back(batch);
  } else {
    s.batches.push_back(batch);
    // In request order: sends to one peer are framed in the order they were requested.
    bool sends = false;
    for (const OpPtr& op : batch->ops) {
      if (op->request.is_send)
        s.start_send(op);
      else
        s.start_recv(op);
      sends |= op->request.is_send;
    }
    // Sends go out now. Recvs need no round here: a message already read was matched above, and
    // one still in the channel is read by the waiter's poll or the engine thread.
    if (sends) s.progress(true);  // looks for gone peers and deadlines at most once per ms
  }
  s.complete_finished(lock);
  lock.unlock();
  s.channel->wake();
  return work;
}

void Engine::close(const std::string& why_here, const std::string& why_for_peers, Deadline linger,
                   std::span<const int> unreachable) {
  State& s = *state_;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.closed) return;
    s.closed = true;
    for (int p = 0; p < s.size; ++p) s.fail_ops_with(p, ErrorClass::network, why_here);
    for (const auto& b : s.batches)  // recvs from any rank
      for (const OpPtr& op : b->ops)
        if (!op->done)
          s.op_done(op,
                    std::make_exception_ptr(NetworkError(name_of(op->request) + ": " + why_here)));
    s.batches.clear();
    s.posted_recvs.clear();
    // What is written from here on is a goodbye: a peer that refuses the connection it needs has
    // left (as every rank does after an error they all saw), and there is nobody to tell.
    s.channel->closing();
    auto reachable = [&](int p) {
      return std::find(unreachable.begin(), unreachable.end(), p) == unreachable.end();
    };
    for (int p = 0; p < s.size; ++p)
      if (p != s.rank && s.peers[p].gone.empty() && !s.peers[p].poisoned && reachable(p)) {
        s.queue_text(p, FrameKind::bye, 0, why_for_peers);
        // A bye that must first connect (to a peer never written to) connects within the linger
        // too: a peer whose host is unreachable must not hold the close for the connect timeout.
        s.peers[p].out.back().connect_by = std::min(s.peers[p].out.back().connect_by, linger.at());
      }
    s.complete_finished(lock);
    // Flush what is queued (the byes, and frames of sends already completed) while peers read.
    while (!linger.expired() && !s.peers_with_output().empty()) {
      s.progress();
      auto want = s.peers_with_output();
      if (want.empty()) break;
      lock.unlock();
      s.channel->sleep(std::min(linger.at(), Clock::now() + kMaxSleep), want);
      lock.lock();
    }
    s.release_retired();
    s.stop = true;
  }
  s.channel->wake();
  if (s.thread.joinable()) s.thread.join();
  try {
    s.channel->close();
  } catch (const std::exception& e) {
    log_info("p2p: closing the ", s.channel->kind(), " channel: ", e.what());
  }
}

void Engine::State::poll_while(const std::function<bool()>& done) {
  pollers.fetch_add(1);
  const auto stop_at = Clock::now() + kPollBudget;
  bool finished = false;
  for (unsigned round = 0;; ++round) {
    if (done()) {
      finished = true;
      break;
    }
    if (round % 64 == 63 && Clock::now() >= stop_at) break;  // the clock is slow on some VMs
    // Nothing to read or write: keep off the lock (a round is then a few loads, so a message is
    // seen as soon as it lands), but run a round now and then for deadlines and gone peers.
    if (round % kIdleRounds != 0 && !busy.load(std::memory_order_relaxed) &&
        !channel->maybe_unread())
      continue;
    std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
    if (!lock.owns_lock()) continue;
    if (stop) break;
    try {
      progress(true);
    } catch (const std::exception&) {
      // the engine thread reports it
    }
    complete_finished(lock);
  }
  // Done: the engine thread keeps out of the way for a while (the next wait is likely soon). Not
  // done within the budget: it takes over at once, and this thread blocks.
  last_poll_ns.store(finished ? coarse_ns() : 0);
  pollers.fetch_sub(1);
  if (!finished) {
    napping.notify_all();
    channel->wake();
  }
}

void Engine::State::loop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    try {
      progress();
    } catch (const std::exception& e) {
      // progress() handles peers' failures itself; anything else is a bug: fail what is pending.
      log_line(LogLevel::error, detail::concat("p2p engine of group '", group, "': ", e.what()));
      for (int p = 0; p < size; ++p) fail_ops_with(p, ErrorClass::other, e.what());
    }
    complete_finished(lock);
    release_retired();
    if (stop) break;
    if (unread) continue;  // a peer has more: no sleep
    if (pollers.load() > 0 ||
        coarse_ns() - last_poll_ns.load() <
            std::chrono::duration_cast<std::chrono::nanoseconds>(kRecentPoll).count()) {
      // Waiters drive progress: stay off the cores (no periodic wake-ups that would preempt a
      // spinning waiter on a small machine), but look again now and then.
      napping.wait_for(lock, kNap);
      continue;
    }
    auto want = peers_with_output();
    auto until = std::min(next_wakeup(), Clock::now() + kMaxSleep);
    // No op pending and nothing to write: a channel that must poll may poll rarely.
    const bool idle = batches.empty() && want.empty();
    lock.unlock();
    if (idle) {
      channel->sleep_idle(until);
    } else {
      channel->sleep(until, want);
    }
    lock.lock();
  }
}

void Engine::State::progress(bool polling) {
  channel->service();
  unread = false;
  round_at = coarse_now();
  struct EndOfRound {  // round_at is the round's only, however it ends
    Clock::time_point& at;
    ~EndOfRound() { at = {}; }
  } end_of_round{round_at};
  // A waiter's poll loop runs this back to back: there, whether peers are gone and whether
  // deadlines passed (matters of milliseconds) are looked at once per tick of the cheap clock.
  bool look = true;
  if (polling) {
    look = round_at >= next_look;
    if (look) next_look = round_at + std::chrono::milliseconds(1);
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    if (!peers[p].gone.empty()) continue;
    try {
      write_out(p);
      if (read_in(p)) {
        unread = true;
        continue;  // not gone while bytes remain
      }
      if (look) check_gone(p);
    } catch (const Error& e) {
      peers[p].gone = e.what();
      fail_ops_with(p, error_class_of(e), e.what());
    }
  }
  if (look) check_deadlines();
  bool output = false;
  for (int p = 0; p < size && !output; ++p) output = !peers[p].out.empty();
  busy.store(unread || output, std::memory_order_relaxed);
}

std::vector<int> Engine::State::peers_with_output() const {
  std::vector<int> want;
  for (int p = 0; p < size; ++p)
    if (!peers[p].out.empty() && peers[p].gone.empty() && !peers[p].poisoned) want.push_back(p);
  return want;
}

void Engine::State::queue(int peer, OutFrame frame) {
  peers[peer].out.push_back(std::move(frame));
}

void Engine::State::queue_text(int peer, FrameKind kind, uint64_t id, const std::string& text) {
  OutFrame f;
  f.header.kind = kind;
  f.header.id = id;
  f.text = text.substr(0, kMaxTextBytes);
  f.header.bytes = f.text.size();
  f.connect_by = Clock::now() + std::chrono::seconds(10);
  queue(peer, std::move(f));
}

// Writes the peer's queued frames in order, as far as the channel takes them.
void Engine::State::write_out(int peer) {
  Peer& p = peers[peer];
  while (!p.out.empty() && !p.poisoned) {
    OutFrame& f = p.out.front();
    if (!f.text.empty()) f.payload = reinterpret_cast<const std::byte*>(f.text.data());
    const size_t header = sizeof(FrameHeader);
    const size_t total = header + (carries_payload(f.header.kind) ? f.header.bytes : 0);
    if (f.written == 0 && total > header && total <= kCoalesceBytes) {
      // A small frame in one write: one publication to the peer, not two.
      const JoinedFrame joined(f.header, f.payload, total - header);
      f.written = channel->write(peer, joined.data, joined.size, Deadline(f.connect_by));
      if (f.written == 0) return;
    }
    while (f.written < total) {
      size_t n;
      if (f.written < header) {
        n = channel->write(peer, reinterpret_cast<const std::byte*>(&f.header) + f.written,
                           header - f.written, Deadline(f.connect_by));
      } else {
        n = channel->write(peer, f.payload + (f.written - header), total - f.written,
                           Deadline(f.connect_by));
      }
      if (n == 0) return;  // no room: the rest on a later round
      f.written += n;
    }
    OpPtr completes = std::move(f.completes);
    p.out.pop_front();
    if (completes && !completes->done) op_done(completes);
  }
}

void Engine::State::start_send(const OpPtr& op) {
  const Request& r = op->request;
  Peer& p = peers[r.peer];
  op->id = p.next_id++;
  if (!p.gone.empty()) {
    op_done(op, std::make_exception_ptr(NetworkError(name_of(r) + ": " + p.gone)));
    return;
  }
  OutFrame f;
  f.header = message_header(r, op->id, op->bytes);
  f.connect_by = op->batch->deadline.at();
  if (f.header.kind == FrameKind::eager) {
    f.payload = static_cast<const std::byte*>(r.input);
    f.completes = op;
  } else {
    op->stage = PendingOp::Stage::awaiting_cts;
    p.awaiting_cts[op->id] = op;
  }
  queue(r.peer, std::move(f));
}

// [Fast path] A small send toward a peer with nothing queued goes into the channel at once, whole,
// and is done: no batch, no op, no completion hand-off. Anything else (no room, a frame still
// queued, a peer gone, the engine closed) takes the general path.
bool send_now_fits(const Request& r) {
  return sizeof(FrameHeader) + r.count * element_size(r.dtype) <= kCoalesceBytes;
}

bool Engine::State::send_now(const Request& r, Deadline deadline) {
  const uint64_t bytes = r.count * element_size(r.dtype);
  if (!send_now_fits(r)) return false;
  std::unique_lock<std::mutex> lock(mu);
  Peer& p = peers[r.peer];
  if (closed || !p.out.empty() || !p.gone.empty() || p.poisoned) return false;
  const JoinedFrame joined(message_header(r, p.next_id, bytes), r.input, bytes);
  try {
    if (!channel->write_whole(r.peer, joined.data, joined.size, deadline)) return false;
  } catch (const Error&) {
    return false;  // the general path meets the same error and reports it in its Work
  }
  ++p.next_id;
  return true;
}

void Engine::State::op_done(const OpPtr& op, std::exception_ptr error) {
  if (op->done) return;
  op->done = true;
  journal_end(op->request, !error, round_at != Clock::time_point{} ? round_at : coarse_now());
  Batch& b = *op->batch;
  if (error && !b.error) b.error = error;
  if (op->request.peer == kAnySource && !error && b.ops.size() == 1)
    detail::WorkAccess::set_source_rank(b.work, op->source);
  if (--b.remaining == 0) {
    // Moved from `batches` to `finished`: no count of the shared pointer changes.
    auto it = std::find(batches.begin(), batches.end(), op->batch);
    if (it != batches.end()) {
      finished.push_back(std::move(*it));
      batches.erase(it);
    } else {
      finished.push_back(op->batch);
    }
  }
}

void Engine::State::release_retired() {
  // A batch and its ops point at each other: break the cycle, or neither is ever freed. An op
  // still referenced elsewhere (a frame being written, a detached recv) keeps its batch alive.
  for (const auto& b : retired) b->ops.clear();
  retired.clear();  // keeps its memory
}

void Engine::State::complete_finished(std::unique_lock<std::mutex>& lock) {
  while (!finished.empty()) {
    std::vector<std::shared_ptr<Batch>> done;
    done.swap(finished);
    // A success nobody else awaits completes here, under the lock; the rest (errors, callbacks,
    // blocked waiters) once it is released, since a callback may post again.
    bool loud = false;
    for (const auto& b : done) {
      b->completed = !b->error && detail::WorkAccess::complete_quietly(b->work);
      loud |= !b->completed;
    }
    if (loud) {
      lock.unlock();
      for (const auto& b : done)
        if (!b->completed) detail::WorkAccess::complete(b->work, b->error);
      lock.lock();
    }
    for (auto& b : done) retired.push_back(std::move(b));
    done.clear();
    if (finished.empty()) {  // keep the vector's memory: no allocation per message
      done.clear();
      finished.swap(done);
    }
  }
}

}  // namespace lockstep::p2p
