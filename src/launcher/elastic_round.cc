// The two sides of an elastic round (elastic_sync.h, [Rounds]): the host, which decides who is in
// it, and every other launcher, which registers and waits for the decision.
#include <algorithm>
#include <thread>

#include "launcher/elastic_keys.h"
#include "launcher/elastic_sync.h"
#include "launcher/free_port.h"
#include "launcher/rank_output.h"
#include "launcher/store_link.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::launcher {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPoll{50};         // how often the host looks at the registrations
constexpr milliseconds kEntryWait{2000};  // between a registration's count and its entry
constexpr milliseconds kStoreCall{2000};

}  // namespace

// Reads registrations seen+1..count of the round into `joined` (one whose entry never comes, its
// launcher having died between its count and its entry, is skipped).
void ElasticSync::read_registrations(int round, int64_t count, std::vector<ElasticNode>& joined,
                                     int& seen) {
  for (int64_t k = seen + 1; k <= count; ++k) {
    const std::string key = elastic_keys::entry(round, k);
    if (wait_keys({key}, Deadline::after(kEntryWait)))
      joined.push_back(parse_elastic_entry(store_->get(key, kStoreCall)));
  }
  seen = static_cast<int>(count);
}

// Whether every other member of the previous round has registered again or is gone, so that a
// node still stopping its ranks is not left out of the next round.
bool ElasticSync::previous_members_settled(const std::vector<ElasticNode>& joined) {
  if (!last_) return true;
  for (const auto& member : last_->members) {
    if (member.id == id_) continue;
    const bool registered = std::any_of(joined.begin(), joined.end(),
                                        [&](const ElasticNode& n) { return n.id == member.id; });
    if (!registered && !member_gone(member)) return false;
  }
  return true;
}

// Restarts after failures before `round`: the previous round's, plus one unless it ended for a
// membership change.
int ElasticSync::next_restart_count(int round) {
  if (!last_ || round == 0) return 0;
  const std::string key = elastic_keys::failed(last_->round);
  if (store_->check({key}) && parse_failure_report(store_->get(key, kStoreCall)).membership_change)
    return last_->restart_count;
  return last_->restart_count + 1;
}

ElasticRound ElasticSync::host_round(int round) {
  const Deadline deadline = Deadline::after(options_.rdzv_timeout);
  store_->set(elastic_keys::open_round(), std::to_string(round));
  std::vector<ElasticNode> joined;  // the others, in the order they registered
  int seen = 0;
  std::optional<Clock::time_point> last_call;  // when the round may close with MIN nodes
  for (;;) {
    check_signals();
    const int64_t count = store_->add(elastic_keys::count(round), 0);
    const size_t before = joined.size();
    if (count > seen) read_registrations(round, count, joined, seen);
    const int nodes = 1 + std::min(static_cast<int>(joined.size()), options_.nnodes_max - 1);
    if (nodes >= options_.nnodes_min && (!last_call || joined.size() != before))
      last_call = Clock::now() + options_.rdzv_last_call;  // each arrival restarts the wait
    if (nodes >= options_.nnodes_max) break;
    if (last_call && Clock::now() >= *last_call && previous_members_settled(joined)) break;
    if (deadline.expired()) {
      if (nodes >= options_.nnodes_min) break;  // a member of the last round never came back
      throw TimeoutError(detail::concat(
          "rendezvous of attempt ", round, " timed out after ",
          options_.rdzv_timeout.count() / 1000.0, " s: ", nodes, " node(s) there (this one",
          joined.empty() ? "" : " and others", "), but --nnodes ", options_.nnodes_min, ":",
          options_.nnodes_max, " needs at least ", options_.nnodes_min,
          ". Start 'lockstep run --nnodes ", options_.nnodes_min, ":", options_.nnodes_max,
          " --master-addr ", options_.master_addr, " --master-port ", options_.master_port,
          " ...' on more nodes, or raise --rdzv-timeout"));
    }
    std::this_thread::sleep_for(kPoll);
  }
  ElasticRound decided{.round = round,
                       .run_id = run_id_,
                       .master_port = pick_free_port(),
                       .restart_count = next_restart_count(round),
                       .max_restarts = options_.max_restarts,
                       .members = {self()}};
  const size_t admitted = std::min(joined.size(), static_cast<size_t>(options_.nnodes_max - 1));
  std::vector<ElasticNode> others(joined.begin(), joined.begin() + static_cast<long>(admitted));
  std::sort(others.begin(), others.end(),
            [](const ElasticNode& a, const ElasticNode& b) { return a.id < b.id; });
  decided.members.insert(decided.members.end(), others.begin(), others.end());
  store_->set(elastic_keys::closed(round), round_record(decided));
  if (last_)  // name the nodes the job goes on without
    for (size_t r = 1; r < last_->members.size(); ++r)
      if (std::none_of(decided.members.begin(), decided.members.end(),
                       [&](const ElasticNode& n) { return n.id == last_->members[r].id; }))
        say(detail::concat("attempt ", round, " goes on without ",
                           describe_node(static_cast<int>(r), last_->members[r]), " of attempt ",
                           last_->round, ": it is gone"));
  return decided;
}

ElasticRound ElasticSync::joiner_round(int round) {
  const Deadline deadline = Deadline::after(options_.rdzv_timeout);
  auto timed_out = [&](const std::string& what) {
    return TimeoutError(
        detail::concat("rendezvous timed out after ", options_.rdzv_timeout.count() / 1000.0,
                       " s: ", what, " (the elastic job's store is at ", options_.master_addr, ":",
                       store_port(), "); raise --rdzv-timeout to wait longer"));
  };
  if (!wait_keys({elastic_keys::open_round()}, deadline))
    throw timed_out("the store's host never opened a round");
  int target = round;
  for (;;) {
    const int open = std::stoi(store_->get(elastic_keys::open_round(), kStoreCall));
    target = std::max(target, store_->check({elastic_keys::closed(open)}) ? open + 1 : open);
    const int64_t k = store_->add(elastic_keys::count(target), 1);
    store_->set(elastic_keys::entry(target, k), elastic_entry(self()));
    for (;;) {
      if (wait_keys({elastic_keys::closed(target)}, Deadline::after(kSlice))) break;
      if (store_->check({elastic_keys::finished()}))
        throw Error(detail::concat("the elastic job at ", options_.master_addr, ":", store_port(),
                                   " ended before this node was admitted"));
      if (deadline.expired())
        throw timed_out(
            detail::concat("this node was never admitted: the job kept running with --nnodes ",
                           options_.nnodes_max, " nodes at most, or never restarted"));
    }
    ElasticRound decided =
        parse_round_record(target, store_->get(elastic_keys::closed(target), kStoreCall));
    if (std::any_of(decided.members.begin(), decided.members.end(),
                    [&](const ElasticNode& n) { return n.id == id_; }))
      return decided;
    if (!said_waiting_)
      say(detail::concat("the job is running attempt ", target, " with ", decided.members.size(),
                         " node(s); this node waits to be admitted at its next restart"));
    said_waiting_ = true;
    ++target;
  }
}

}  // namespace lockstep::launcher
