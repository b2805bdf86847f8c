#include "testing/fault_controller.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "lockstep/core/error.h"

namespace lockstep::testing {

namespace {

// The failsafe of wait_held and wait_quiet: a test that waits for what never comes fails.
constexpr std::chrono::seconds kFailsafe{60};

}  // namespace

FaultController::FaultController(int size)
    : size_(size),
      links_(static_cast<size_t>(size) * static_cast<size_t>(size)),
      ranks_(static_cast<size_t>(size)) {}

size_t FaultController::index(int from, int to) const {
  check_rank(from, false);
  check_rank(to, false);
  return static_cast<size_t>(from) * static_cast<size_t>(size_) + static_cast<size_t>(to);
}

void FaultController::check_rank(int rank, bool any_ok) const {
  if ((any_ok && rank == kAnyRank) || (rank >= 0 && rank < size_)) return;
  throw std::logic_error(
      detail::concat("FaultController: no rank ", rank, " in a group of ", size_));
}

template <class F>
void FaultController::for_links(int from, int to, F f) {
  check_rank(from, true);
  check_rank(to, true);
  for (int a = 0; a < size_; ++a)
    for (int b = 0; b < size_; ++b)
      if (a != b && (from == kAnyRank || from == a) && (to == kAnyRank || to == b)) f(link(a, b));
}

void FaultController::changed() {
  ++epoch_;
  cv_.notify_all();
}

void FaultController::deliver(Link& l, std::deque<Packet>::iterator it) {
  l.inbox.push_back(std::move(*it));
  l.held.erase(it);
}

void FaultController::hold(int from, int to) {
  std::lock_guard lock(mu_);
  for_links(from, to, [](Link& l) { l.holding = true; });
}

void FaultController::release_next(int from, int to) {
  release_at(from, to, 0);
}

void FaultController::release_at(int from, int to, size_t index) {
  std::lock_guard lock(mu_);
  Link& l = link(from, to);
  if (index >= l.held.size())
    throw std::logic_error(detail::concat("FaultController: rank ", from, " -> rank ", to,
                                          " holds ", l.held.size(), " packet(s), no packet #",
                                          index));
  deliver(l, l.held.begin() + static_cast<std::ptrdiff_t>(index));
  changed();
}

void FaultController::release(int from, int to) {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint64_t, Link*>> order;  // every held packet, by number
  for_links(from, to, [&](Link& l) {
    l.holding = false;
    for (const Packet& p : l.held) order.emplace_back(p.number, &l);
  });
  std::sort(order.begin(), order.end());
  for (auto& [number, l] : order) deliver(*l, l->held.begin());
  changed();
}

void FaultController::drop_next(int from, int to, int n) {
  std::lock_guard lock(mu_);
  for_links(from, to, [n](Link& l) { l.drops += n; });
}

void FaultController::cut(int a, int b) {
  std::lock_guard lock(mu_);
  for (Link* l : {&link(a, b), &link(b, a)}) {
    l->cut = true;
    l->held.clear();
  }
  changed();
}

size_t FaultController::held(int from, int to) const {
  std::lock_guard lock(mu_);
  return link(from, to).held.size();
}

size_t FaultController::dropped(int from, int to) const {
  std::lock_guard lock(mu_);
  return link(from, to).dropped;
}

std::vector<std::pair<int, int>> FaultController::held_links() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint64_t, std::pair<int, int>>> order;
  for (int a = 0; a < size_; ++a)
    for (int b = 0; b < size_; ++b)
      if (a != b && !link(a, b).held.empty())
        order.push_back({link(a, b).held.front().number, {a, b}});
  std::sort(order.begin(), order.end());
  std::vector<std::pair<int, int>> links;
  for (auto& [number, l] : order) links.push_back(l);
  return links;
}

void FaultController::wait_held(int from, int to, size_t n) {
  std::unique_lock lock(mu_);
  const Link& l = link(from, to);
  if (!cv_.wait_for(lock, kFailsafe, [&] { return l.held.size() >= n; }))
    throw std::runtime_error(detail::concat("FaultController::wait_held: rank ", from, " -> rank ",
                                            to, " holds ", l.held.size(), " packet(s), not ", n,
                                            ", after ", kFailsafe.count(), " s"));
}

bool FaultController::quiet() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [&](const Rank& r) {
    return r.finished || (r.waiting && r.waiting_since == epoch_);
  });
}

void FaultController::wait_quiet() {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, kFailsafe, [&] { return quiet(); })) {
    std::string busy;
    for (int r = 0; r < size_; ++r) {
      const Rank& s = ranks_[static_cast<size_t>(r)];
      if (!s.finished && !(s.waiting && s.waiting_since == epoch_))
        busy += (busy.empty() ? "" : ", ") + std::to_string(r);
    }
    throw std::runtime_error(detail::concat("FaultController::wait_quiet: ranks [", busy,
                                            "] still busy after ", kFailsafe.count(), " s"));
  }
}

bool FaultController::all_finished() const {
  std::lock_guard lock(mu_);
  return std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.finished; });
}

FaultController::Fate FaultController::send(int from, int to, std::vector<std::byte> bytes) {
  std::lock_guard lock(mu_);
  Link& l = link(from, to);
  if (l.cut) return Fate::refused;
  if (l.drops > 0) {
    --l.drops;
    ++l.dropped;
    return Fate::dropped;
  }
  Packet p{.bytes = std::move(bytes), .end = false, .number = next_number_++};
  const bool hold = l.holding;
  (hold ? l.held : l.inbox).push_back(std::move(p));
  changed();
  return hold ? Fate::held : Fate::delivered;
}

void FaultController::send_end(int from, int to) {
  std::lock_guard lock(mu_);
  Link& l = link(from, to);
  if (l.cut) return;
  Packet p{.bytes = {}, .end = true, .number = next_number_++};
  (l.holding ? l.held : l.inbox).push_back(std::move(p));
  changed();
}

std::optional<Packet> FaultController::take(int from, int to) {
  std::lock_guard lock(mu_);
  Link& l = link(from, to);
  if (l.inbox.empty()) return std::nullopt;
  Packet p = std::move(l.inbox.front());
  l.inbox.pop_front();
  return p;
}

bool FaultController::has_packet(int from, int to) const {
  std::lock_guard lock(mu_);
  return !link(from, to).inbox.empty();
}

bool FaultController::next_is_end(int from, int to) const {
  std::lock_guard lock(mu_);
  const Link& l = link(from, to);
  return !l.inbox.empty() && l.inbox.front().end;
}

std::optional<std::vector<std::byte>> FaultController::peek(int from, int to, size_t bytes) const {
  std::lock_guard lock(mu_);
  const Link& l = link(from, to);
  if (l.inbox.empty()) return std::nullopt;
  const auto& b = l.inbox.front().bytes;
  return std::vector<std::byte>(b.begin(),
                                b.begin() + static_cast<std::ptrdiff_t>(std::min(bytes, b.size())));
}

std::string FaultController::cut_reason(int a, int b) const {
  std::lock_guard lock(mu_);
  if (!link(a, b).cut) return "";
  return detail::concat("the link between rank ", std::min(a, b), " and rank ", std::max(a, b),
                        " was cut by the fault controller");
}

uint64_t FaultController::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

void FaultController::wait_change(int rank, uint64_t seen, Clock::time_point until) {
  std::unique_lock lock(mu_);
  Rank& r = ranks_.at(static_cast<size_t>(rank));
  r.waiting = true;
  r.waiting_since = seen;
  cv_.notify_all();  // a wait_quiet may be waiting for this rank
  cv_.wait_until(lock, until, [&] { return epoch_ != seen; });
  r.waiting = false;
}

void FaultController::poke() {
  std::lock_guard lock(mu_);
  changed();
}

void FaultController::finished(int rank) {
  std::lock_guard lock(mu_);
  ranks_.at(static_cast<size_t>(rank)).finished = true;
  changed();
}

}  // namespace lockstep::testing
