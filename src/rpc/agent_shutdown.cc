// Agent's shutdown (agent.h): graceful, bounded. This worker stops making calls, waits for its own,
// says it is done in the store, and serves on until every other worker is done or dead; then it
// says goodbye on every connection and stops its threads.
#include <unistd.h>

#include <thread>

#include "core/log.h"
#include "rpc/agent.h"
#include "rpc/agent_detail.h"
#include "rpc/error_body.h"

namespace lockstep::rpc {

namespace {

std::string names_of(const std::vector<WorkerInfo>& workers) {
  std::vector<std::string> names;
  for (const WorkerInfo& w : workers) names.push_back(describe(w));
  return name_list(names, 8);
}

}  // namespace

ShutdownReport Agent::shutdown(std::chrono::milliseconds timeout) {
  LOCKSTEP_ENFORCE(!t_in_handler, InvalidArgument,
                   "rpc: shutdown() was called from inside a registered function; call it from "
                   "the program's own thread");
  std::lock_guard lock(shutdown_mu_);
  if (report_) return *report_;
  const Deadline deadline = Deadline::after(timeout);
  state_ = State::draining;
  ShutdownReport report;
  wait_own_calls(deadline);
  try {
    store_->set(done_key(rank_), "1");
    wait_others(deadline, report);
  } catch (const Error& e) {
    log_warning("rpc: shutdown could not reach the store (", e.what(),
                "), so it closes without waiting for the other workers");
  }
  state_ = State::closed;
  send_goodbyes();
  close_all(deadline);
  if (!report.clean())
    log_warning("rpc: shutdown of ", self().name, " finished with ",
                report.dead.empty() ? "" : "dead workers: " + names_of(report.dead),
                !report.dead.empty() && !report.unfinished.empty() ? "; " : "",
                report.unfinished.empty()
                    ? ""
                    : detail::concat("workers not done within ", timeout.count() / 1000.0,
                                     " s: ", names_of(report.unfinished)));
  report_ = report;
  return report;
}

void Agent::wait_own_calls(Deadline deadline) {
  auto pending = [&] {
    size_t n = 0;
    for (const auto& p : peers_) {
      std::shared_ptr<Connection> out;
      {
        std::lock_guard lock(p->mu);
        out = p->out;
      }
      if (!out) continue;
      std::lock_guard lock(out->mu);
      n += out->pending.size();
    }
    return n;
  };
  auto pause = std::chrono::milliseconds(1);
  while (pending() > 0 && !deadline.expired()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

bool Agent::probe_dead(int rank) {
  {
    Peer& p = *peers_[static_cast<size_t>(rank)];
    std::lock_guard lock(p.mu);
    if (p.out) return false;  // a connection: its end would say so
  }
  const WorkerRecord& r = workers_[static_cast<size_t>(rank)];
  net::Fd fd;
  int err =
      net::connect_tcp_once(r.address, r.port, Deadline::after(std::chrono::milliseconds(200)), fd);
  return err == ECONNREFUSED || net::is_unreachable(err);
}

void Agent::wait_others(Deadline deadline, ShutdownReport& report) {
  std::vector<int> waiting;
  for (int r = 0; r < world_size_; ++r)
    if (r != rank_) waiting.push_back(r);
  Clock::time_point probed = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (!waiting.empty()) {
    std::vector<int> still;
    for (int r : waiting) {
      PeerState state;
      {
        Peer& p = *peers_[static_cast<size_t>(r)];
        std::lock_guard lock(p.mu);
        state = p.state;
      }
      if (state == PeerState::dead) {
        if (!store_->check({done_key(r)})) report.dead.push_back(worker(r));
        continue;
      }
      if (state == PeerState::gone || store_->check({done_key(r)})) continue;
      still.push_back(r);
    }
    waiting.swap(still);
    if (waiting.empty()) break;
    if (deadline.expired()) {
      for (int r : waiting) report.unfinished.push_back(worker(r));
      break;
    }
    // A worker that died before this one ever connected to it: its port refuses.
    if (Clock::now() - probed > std::chrono::milliseconds(250)) {
      for (int r : waiting)
        if (probe_dead(r) && !store_->check({done_key(r)}))
          mark_peer(r, PeerState::dead, "its port refuses connections: its process has ended");
      probed = Clock::now();
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  // The store's host leaves last, so that the others' last reads still find it.
  const int others = world_size_ - 1 - static_cast<int>(report.dead.size());
  if (!hosts_store_) {
    store_->add(kLeftKey, 1);
    return;
  }
  Deadline linger(std::min(deadline.at(), Clock::now() + std::chrono::seconds(3)));
  while (store_->add(kLeftKey, 0) < others && !linger.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

void Agent::send_goodbyes() {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(conns_mu_);
    for (const auto& [id, conn] : conns_)
      if (conn->established.load()) all.push_back(conn);
  }
  for (const auto& conn : all)
    conn->send(FrameKind::goodbye, 0, 0, Message{},
               Deadline::after(std::chrono::milliseconds(200)));
}

void Agent::close_all(Deadline deadline) {
  uint64_t one = 1;
  if (wake_.valid() && ::write(wake_.get(), &one, sizeof one) < 0)
    log_warning("rpc: cannot wake the pool");
  std::vector<PoolThread> threads;
  {
    std::unique_lock lock(pool_mu_);
    pool_closed_ = true;
    // Threads in a function finish it first: wait for them until the deadline (at least a
    // moment, for those only returning to the poller), then leave the rest to end on their own.
    Deadline linger(std::max(deadline.at(), Clock::now() + std::chrono::milliseconds(200)));
    pool_cv_.wait_until(lock, linger.at(), [&] {
      for (const auto& t : pool_)
        if (!*t.exited && t.thread.get_id() != std::this_thread::get_id()) return false;
      return true;
    });
    threads.swap(pool_);
  }
  size_t left = 0;
  for (auto& t : threads) {
    if (*t.exited && t.thread.get_id() != std::this_thread::get_id()) {
      t.thread.join();
    } else {
      if (t.thread.get_id() != std::this_thread::get_id()) ++left;
      t.thread.detach();  // it holds the agent; its function's answer finds the connection closed
    }
  }
  if (left > 0)
    log_warning("rpc: shutdown leaves ", left,
                " thread(s) still running a registered function; their answers are dropped");
  {
    std::lock_guard lock(timer_mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) {
    if (timer_.get_id() == std::this_thread::get_id())
      timer_.detach();
    else
      timer_.join();
  }
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(conns_mu_);
    for (const auto& [id, conn] : conns_) all.push_back(conn);
  }
  for (const auto& conn : all) end_connection(conn, 0, "rpc shut down here");
  listener_.reset();
}

}  // namespace lockstep::rpc
