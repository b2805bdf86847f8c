#include "launcher/elastic_sync.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "launcher/elastic_keys.h"
#include "launcher/rank_output.h"
#include "launcher/signals.h"
#include "launcher/store_link.h"
#include "lockstep/store/tcp_store.h"
#include "net/bind.h"
#include "net/socket.h"

namespace lockstep::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kLeaveGrace{15'000};  // the host waits this long past --term-timeout

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

std::string make_run_id() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << random() << random();
  return out.str().substr(0, 12);
}

}  // namespace

ElasticSync::ElasticSync(const LaunchOptions& options, SignalCatcher& signals)
    : options_(options),
      signals_(signals),
      run_id_(options.run_id.empty() ? make_run_id() : options.run_id),
      host_(net::hostname()),
      store_host_(options.master_addr),
      watch_(options.rdzv_keep_alive) {
  try_to_host();
  connect();
  try {
    id_ = static_cast<int>(store_->add(elastic_keys::next_id(), 1));
  } catch (const Error& e) {
    lost_store(e, "registering");
  }
  const milliseconds renew = std::max(milliseconds(50), options.rdzv_keep_alive / 4);
  lease_ =
      std::make_unique<LeaseKeeper>(TcpStoreOptions{.host = store_host_,
                                                    .port = static_cast<uint16_t>(store_port()),
                                                    .timeout = kSlice * 4,
                                                    .secret = options.secret},
                                    id_, renew);
}

ElasticSync::~ElasticSync() {
  lease_.reset();
  if (!store_ || id_ < 0) return;
  try {
    store_->set(elastic_keys::gone(id_), "1");
  } catch (const std::exception&) {
    // Best effort: the others also see the lease stop.
  }
}

// [Host] Only where --master-addr is this host's own address; a port already taken there means
// another launcher of the job hosts the store.
bool ElasticSync::try_to_host() {
  const std::string& addr = options_.master_addr;
  if (!is_loopback(addr) && !net::is_local_address(addr)) return false;
  const std::string bind = net::bind_address_for(is_loopback(addr) ? "127.0.0.1" : addr,
                                                 "lockstep run's store", options_.bind_addr);
  try {
    server_ = std::make_unique<TcpStoreServer>(
        TcpStoreServerOptions{.bind_host = bind,
                              .port = static_cast<uint16_t>(options_.master_port),
                              .secret = options_.secret});
  } catch (const NetworkError& e) {
    say(detail::concat("the store's port ", options_.master_port, " on ", addr, " is taken (",
                       e.what(), "); joining the store there"));
    return false;
  }
  store_host_ = bind == "0.0.0.0" ? "127.0.0.1" : bind == "::" ? "::1" : bind;
  say(detail::concat("hosting the elastic job's store on ", addr, ":", store_port(),
                     " (this node is node 0 of every attempt)"));
  return true;
}

void ElasticSync::connect() {
  store_ = connect_store(
      {.host = store_host_,
       .port = store_port(),
       .secret = options_.secret,
       .gave_up =
           [&](const std::string& last) {
             return detail::concat(
                 "this node could not reach the elastic job's store at ", store_host_, ":",
                 store_port(), " within --rdzv-timeout (", last,
                 "). Start the launcher on the host with that address (--master-addr) first, "
                 "with the same --master-port, or raise --rdzv-timeout");
           },
       .still_waiting =
           [&] {
             say(detail::concat("still waiting for the elastic job's store at ", store_host_, ":",
                                store_port()));
           }},
      Deadline::after(options_.rdzv_timeout), signals_);
}

void ElasticSync::check_signals() {
  throw_if_interrupted(signals_);
}

bool ElasticSync::wait_keys(const std::vector<std::string>& keys, Deadline deadline) {
  return launcher::wait_keys(*store_, signals_, keys, deadline);
}

int ElasticSync::store_port() const {
  return server_ ? server_->port() : options_.master_port;
}

TcpStore& ElasticSync::store() {
  return *store_;
}

void ElasticSync::lost_store(const std::exception& e, const char* during) const {
  throw Error(detail::concat(
      "lost contact with the elastic job's store at ", options_.master_addr, ":", store_port(),
      " while ", during, " (", e.what(),
      "): the launcher that hosts it has ended or its host is unreachable, and an elastic job "
      "cannot go on without it"));
}

ElasticNode ElasticSync::self() const {
  return ElasticNode{.id = id_,
                     .host = host_,
                     .pid = static_cast<int>(::getpid()),
                     .nproc = options_.nproc_per_node,
                     .max_restarts = options_.max_restarts};
}

WorldLayout ElasticSync::join(int previous) {
  round_.reset();
  ElasticRound round;
  try {
    round = hosts_store() ? host_round(previous + 1) : joiner_round(previous + 1);
  } catch (const Interrupted&) {
    throw;
  } catch (const TimeoutError&) {
    throw;
  } catch (const ConfigError&) {
    throw;
  } catch (const NetworkError& e) {
    lost_store(e, "waiting for the rendezvous");
  }
  auto layout = layout_in_round(round, id_, options_.max_restarts);
  if (!layout) throw StoreError("this node is not a member of the round it was admitted to");
  round_ = round;
  if (hosts_store()) last_ = round;
  return *layout;
}

// The report that won for the attempt (ours, or one written just before it).
std::optional<RemoteFailure> ElasticSync::first_report(int attempt, const RemoteFailure& mine) {
  store_->compare_set(elastic_keys::failed(attempt), "", failure_report(mine));
  return parse_failure_report(store_->get(elastic_keys::failed(attempt), kSlice * 4));
}

bool ElasticSync::member_gone(const ElasticNode& member) {
  return store_->check({elastic_keys::gone(member.id)}) || watch_.expired(*store_, member.id);
}

// A member (other than the host, whose end ends the store) that is gone, reported as the
// attempt's failure.
std::optional<RemoteFailure> ElasticSync::find_gone_member(int attempt) {
  const auto& members = round_->members;
  for (size_t r = 1; r < members.size(); ++r) {
    if (members[r].id == id_ || !member_gone(members[r])) continue;
    const bool exited = store_->check({elastic_keys::gone(members[r].id)});
    std::string what =
        exited ? describe_node(static_cast<int>(r), members[r]) + " left the job"
               : detail::concat(describe_node(static_cast<int>(r), members[r]),
                                " is gone: its launcher has not renewed its lease for ",
                                watch_.silent_seconds(members[r].id), " s (--rdzv-keep-alive)");
    return first_report(
        attempt,
        RemoteFailure{
            .node_rank = static_cast<int>(r), .exit_code = 1, .what = what, .restartable = true});
  }
  return std::nullopt;
}

std::optional<RemoteFailure> ElasticSync::check_failure(int attempt) {
  try {
    if (store_->check({elastic_keys::failed(attempt)}))
      return parse_failure_report(store_->get(elastic_keys::failed(attempt), kSlice * 4));
    if (!round_) return std::nullopt;
    if (auto gone = find_gone_member(attempt)) return gone;
    if (static_cast<int>(round_->members.size()) >= options_.nnodes_max) return std::nullopt;
    const int64_t waiting = store_->add(elastic_keys::count(attempt + 1), 0);
    if (waiting == 0 || store_->add(elastic_keys::done_count(attempt), 0) > 0) return std::nullopt;
    const int me = layout_in_round(*round_, id_, options_.max_restarts)->node_rank;
    return first_report(attempt,
                        RemoteFailure{.node_rank = me,
                                      .exit_code = 1,
                                      .what = detail::concat(waiting, " node(s) waiting to join"),
                                      .restartable = true,
                                      .membership_change = true});
  } catch (const NetworkError& e) {
    lost_store(e, "watching the other nodes");
  } catch (const TimeoutError& e) {
    lost_store(e, "watching the other nodes");
  }
}

void ElasticSync::report_failure(int attempt, const RemoteFailure& failure) {
  store_->compare_set(elastic_keys::failed(attempt), "", failure_report(failure));
}

std::optional<RemoteFailure> ElasticSync::wait_outcome(int attempt) {
  const int me = layout_in_round(*round_, id_, options_.max_restarts)->node_rank;
  const int64_t members = static_cast<int64_t>(round_->members.size());
  store_->set(elastic_keys::done(attempt, me), "1");
  store_->add(elastic_keys::done_count(attempt), 1);
  const milliseconds interval = std::max(options_.monitor_interval, milliseconds(20));
  for (;;) {  // no deadline: the other nodes' ranks may legitimately run for days
    check_signals();
    try {
      if (store_->add(elastic_keys::done_count(attempt), 0) >= members) return std::nullopt;
    } catch (const NetworkError& e) {
      lost_store(e, "waiting for the other nodes to finish");
    } catch (const TimeoutError& e) {
      lost_store(e, "waiting for the other nodes to finish");
    }
    if (auto failure = check_failure(attempt)) return failure;
    std::this_thread::sleep_for(interval);
  }
}

void ElasticSync::leave() {
  if (!round_) return;
  const int attempt = round_->round;
  try {
    if (!hosts_store()) {
      const int me = layout_in_round(*round_, id_, options_.max_restarts)->node_rank;
      store_->set(elastic_keys::left(attempt, me), "1");
      return;
    }
    // The host keeps the store up until every other member has read the outcome or is gone.
    store_->set(elastic_keys::finished(), "1");  // for nodes still waiting to be admitted
    Deadline deadline =
        Deadline::after(std::min(options_.rdzv_timeout, options_.term_timeout + kLeaveGrace));
    const auto& members = round_->members;
    for (size_t r = 1; r < members.size() && !deadline.expired();) {
      if (!signals_.drain().empty()) return;  // asked again: stop waiting
      if (store_->check({elastic_keys::left(attempt, static_cast<int>(r))}) ||
          member_gone(members[r])) {
        ++r;
        continue;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  } catch (const std::exception&) {
    // Leaving is best effort: the outcome is already decided.
  }
}

}  // namespace lockstep::launcher
