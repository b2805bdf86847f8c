#include "store/connection_table.h"

namespace lockstep::store_detail {

void ConnectionTable::add(std::unique_ptr<ServerConnection> c) {
  const uint64_t id = c->id();
  poller_.add(c->fd(), id, /*read=*/true, /*write=*/false);
  ServerConnection& ref = *c;
  entries_.emplace(id, Entry{.conn = std::move(c)});
  in_handshake_.insert(id);
  update(ref);
}

ServerConnection* ConnectionTable::find(uint64_t id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.conn.get();
}

void ConnectionTable::update(ServerConnection& c) {
  Entry& e = entries_.at(c.id());
  std::optional<Clock::time_point> due = c.deadline();  // none once dead
  if (due != e.armed) {
    if (e.armed) deadlines_.erase({*e.armed, c.id()});
    if (due) deadlines_.insert({*due, c.id()});
    e.armed = due;
  }
  if (c.dead() || c.handshaken()) in_handshake_.erase(c.id());
  if (c.dead()) {
    if (!e.listed_dead) dead_.push_back(c.id());
    e.listed_dead = true;
    return;
  }
  // Level-triggered: a connection with a reply to send is watched only for writing, so that it
  // is not read (and sends no new request) until its reply is out.
  if (c.wants_write() != e.writing) {
    e.writing = c.wants_write();
    poller_.modify(c.fd(), c.id(), !e.writing, e.writing);
  }
}

void ConnectionTable::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    ServerConnection& c = *entries_.at(deadlines_.begin()->second).conn;
    c.mark_overdue();
    c.mark_dead("deadline passed");  // no-op after mark_overdue; makes sure the loop ends
    update(c);
  }
}

std::optional<Clock::time_point> ConnectionTable::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

ServerConnection* ConnectionTable::oldest_in_handshake() {
  return in_handshake_.empty() ? nullptr : find(*in_handshake_.begin());
}

void ConnectionTable::drop_dead(const std::function<void(ServerConnection&)>& on_drop) {
  for (uint64_t id : dead_) {
    auto it = entries_.find(id);
    on_drop(*it->second.conn);
    poller_.remove(it->second.conn->fd());
    entries_.erase(it);  // closes the socket
  }
  dead_.clear();
}

}  // namespace lockstep::store_detail
