// Agent's timer (agent.h): fails calls past their deadline, and drops connections whose opening
// never finished.
#include "rpc/agent.h"

#include "core/log.h"
#include "rpc/agent_detail.h"

namespace lockstep::rpc {

void Agent::arm_timer(uint64_t call_id, const std::shared_ptr<Connection>& conn,
                      Clock::time_point deadline) {
  bool first;
  {
    std::lock_guard lock(timer_mu_);
    auto [it, inserted] = deadlines_.emplace(deadline, call_id);
    first = it == deadlines_.begin();
    timed_[call_id] = conn;
  }
  if (first) timer_cv_.notify_one();
}

void Agent::disarm_timer(uint64_t call_id, Clock::time_point deadline) {
  std::lock_guard lock(timer_mu_);
  deadlines_.erase({deadline, call_id});
  timed_.erase(call_id);
}

std::optional<PendingCall> Agent::take_pending(const std::shared_ptr<Connection>& conn,
                                               uint64_t call_id) {
  std::optional<PendingCall> call;
  {
    std::lock_guard lock(conn->mu);
    auto it = conn->pending.find(call_id);
    if (it == conn->pending.end()) return call;
    call = std::move(it->second);
    conn->pending.erase(it);
  }
  if (call->deadline != Clock::time_point::max()) disarm_timer(call_id, call->deadline);
  return call;
}

void Agent::fail_call(const std::shared_ptr<Connection>& conn, uint64_t call_id,
                      std::exception_ptr error) {
  if (auto call = take_pending(conn, call_id))
    call->state->complete_error(call->state, std::move(error));
}

void Agent::timer_loop() {
  std::unique_lock lock(timer_mu_);
  Clock::time_point next_sweep = Clock::now() + std::chrono::seconds(1);
  while (!timer_stop_) {
    Clock::time_point wake = next_sweep;
    if (!deadlines_.empty()) wake = std::min(wake, deadlines_.begin()->first);
    timer_cv_.wait_until(lock, wake);
    if (timer_stop_) break;
    const Clock::time_point now = Clock::now();
    std::vector<std::pair<uint64_t, std::weak_ptr<Connection>>> expired;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      uint64_t id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      auto it = timed_.find(id);
      if (it == timed_.end()) continue;
      expired.emplace_back(id, std::move(it->second));
      timed_.erase(it);
    }
    const bool sweep = now >= next_sweep;
    if (sweep) next_sweep = now + std::chrono::seconds(1);
    lock.unlock();
    for (auto& [id, weak] : expired) {
      auto conn = weak.lock();
      if (!conn) continue;
      std::optional<PendingCall> call = take_pending(conn, id);  // its timer entry is gone already
      if (!call) continue;
      const WorkerInfo& w = worker(conn->peer.load());
      const std::string waited = seconds_text(call->deadline - call->started);
      call->state->complete_error(
          call->state,
          std::make_exception_ptr(RpcTimeout(
              detail::concat(call->what, ": no answer from ", describe(w), " within ", waited,
                             " (the call's timeout). It may be slow, "
                             "stuck in the function, or the message was lost"),
              w.name)));
    }
    if (sweep) sweep_handshakes(now);
    lock.lock();
  }
}

void Agent::sweep_handshakes(Clock::time_point now) {
  std::vector<std::shared_ptr<Connection>> late;
  {
    std::lock_guard lock(conns_mu_);
    for (const auto& [id, conn] : conns_)
      if (!conn->established.load() && now >= conn->handshake_until) late.push_back(conn);
  }
  for (const auto& conn : late) {
    log_info("rpc: dropped a connection that did not finish its opening within 10 s");
    drop_connection(conn);
  }
}

}  // namespace lockstep::rpc
