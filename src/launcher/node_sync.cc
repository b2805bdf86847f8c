#include "launcher/node_sync.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "launcher/free_port.h"
#include "launcher/rank_output.h"
#include "launcher/signals.h"
#include "launcher/store_link.h"
#include "lockstep/store/tcp_store.h"
#include "net/bind.h"
#include "net/socket.h"
#include "store/refusals.h"

namespace lockstep::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kLeaveGrace{15'000};  // node 0 waits this long past --term-timeout

std::string key(int attempt, const std::string& rest) {
  return "lockstep_launcher/a" + std::to_string(attempt) + "/" + rest;
}

std::string make_run_id() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << random() << random();
  return out.str().substr(0, 12);
}

std::string join_ints(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

}  // namespace

NodeSync::NodeSync(const LaunchOptions& options, SignalCatcher& signals)
    : options_(options), signals_(signals), run_id_(options.run_id), host_(net::hostname()) {
  if (run_id_.empty()) run_id_ = make_run_id();
  if (options.node_rank == 0) {
    const std::string bind =
        net::bind_address_for(is_loopback(options.master_addr) ? "127.0.0.1" : options.master_addr,
                              "lockstep run's store", options.bind_addr);
    server_ = std::make_unique<TcpStoreServer>(
        TcpStoreServerOptions{.bind_host = bind,
                              .port = static_cast<uint16_t>(options.master_port),
                              .secret = options.secret});
    // This node reaches its own store where the store listens: bound to one interface's address
    // (the usual case on several hosts), the store is not on the loopback address.
    if (bind == "0.0.0.0") {
      own_store_host_ = "127.0.0.1";
    } else if (bind == "::") {
      own_store_host_ = "::1";
    } else {
      own_store_host_ = bind;
    }
  }
  if (options.nnodes > 1) connect();
}

NodeSync::~NodeSync() = default;

int NodeSync::store_port() const {
  return server_ ? server_->port() : options_.master_port;
}

void NodeSync::connect() {
  const std::string host = server_ ? own_store_host_ : options_.master_addr;
  const int node = options_.node_rank;
  store_ = connect_store(
      {.host = host,
       .port = store_port(),
       .secret = options_.secret,
       .call_timeout = std::max(options_.rdzv_timeout, milliseconds(kSlice)),
       .gave_up =
           [&](const std::string& last) {
             return detail::concat(
                 "node ", node, " could not reach node 0's store at ", host, ":", store_port(),
                 " within --rdzv-timeout (", last,
                 "). Start node 0 (--node-rank 0) with the same --master-addr and --master-port, "
                 "or raise --rdzv-timeout");
           },
       .still_waiting =
           [&] {
             write_all(2, detail::concat("lockstep run: node ", node,
                                         " still waiting for node 0's store at ", host, ":",
                                         store_port(), "\n"));
           }},
      Deadline::after(options_.rdzv_timeout), signals_);
}

void NodeSync::check_signals() {
  throw_if_interrupted(signals_);
}

std::vector<int> NodeSync::missing_nodes(const std::vector<std::string>& keys) {
  std::vector<int> missing;
  for (int r = 0; r < options_.nnodes; ++r)
    if (!store_->check({keys[static_cast<size_t>(r)]})) missing.push_back(r);
  return missing;
}

bool NodeSync::wait_keys(const std::vector<std::string>& keys, Deadline deadline) {
  return launcher::wait_keys(*store_, signals_, keys, deadline);
}

TcpStore& NodeSync::store() {
  if (!store_)
    store_ = std::make_unique<TcpStore>(TcpStoreOptions{.host = own_store_host_,
                                                        .port = static_cast<uint16_t>(store_port()),
                                                        .timeout = kSlice * 4,
                                                        .secret = options_.secret});
  return *store_;
}

WorldLayout NodeSync::join(int previous) {
  const int attempt = previous + 1;
  joined_ = false;
  int master_port = options_.node_rank == 0 ? pick_free_port() : 0;
  if (options_.nnodes == 1) {
    joined_ = true;
    NodeInfo self{host_, options_.nproc_per_node, options_.max_restarts};
    return WorldLayout{.rank_offset = 0,
                       .world_size = options_.nproc_per_node,
                       .run_id = run_id_,
                       .master_port = master_port,
                       .nodes = {self},
                       .attempt = attempt,
                       .node_rank = 0,
                       .restart_count = attempt};
  }
  const std::string entry =
      node_entry({host_, options_.nproc_per_node, options_.max_restarts}, run_id_,
                 options_.node_rank == 0 ? std::optional<int>(master_port) : std::nullopt);
  store_->set(key(attempt, "node/" + std::to_string(options_.node_rank)), entry);
  std::vector<std::string> keys;
  for (int r = 0; r < options_.nnodes; ++r)
    keys.push_back(key(attempt, "node/" + std::to_string(r)));
  // A node turned away by node 0's store (another secret, or none) is named kRefusalGrace after
  // (src/store/refusals.h); the first attempt's store is this job's alone, so it counts every
  // refusal the store holds.
  RefusalWatch refusals(*store_, /*count_earlier=*/attempt == 0);
  const Deadline deadline = Deadline::after(options_.rdzv_timeout);
  bool all_there = false;
  while (!(all_there =
               wait_keys(keys, Deadline::after(std::min(kRefusalPoll, deadline.remaining()))))) {
    if (auto refused = refusals.overdue()) {
      throw ConfigError(detail::concat(
          "rendezvous of attempt ", attempt, ": node rank(s) ", join_ints(missing_nodes(keys)),
          " of ", options_.nnodes, " have not arrived, and node 0's store (", options_.master_addr,
          ":", store_port(), ") turned a process away (", *refused, ") ",
          kRefusalGrace.count() / 1000.0,
          " s ago: was a missing node started with another "
          "--secret-file (or LOCKSTEP_SECRET), or without one? Give every node the same secret"));
    }
    if (deadline.expired()) break;
  }
  if (!all_there) {
    const std::vector<int> missing = missing_nodes(keys);
    throw TimeoutError(detail::concat(
        "rendezvous of attempt ", attempt, " timed out after ",
        options_.rdzv_timeout.count() / 1000.0, " s: node rank(s) ", join_ints(missing), " of ",
        options_.nnodes, " never arrived at node 0's store (", options_.master_addr, ":",
        store_port(), "). Start 'lockstep run --nnodes ", options_.nnodes,
        " --node-rank R ...' on each missing node with the same --master-addr and "
        "--master-port, or raise --rdzv-timeout"));
  }
  WorldLayout layout = parse_world_layout(store_->multi_get(keys, kSlice * 4), options_.node_rank,
                                          options_.max_restarts);
  layout.attempt = attempt;
  layout.node_rank = options_.node_rank;
  layout.restart_count = attempt;
  joined_ = true;
  return layout;
}

std::optional<RemoteFailure> NodeSync::check_failure(int attempt) {
  if (options_.nnodes == 1 || !store_->check({key(attempt, "failed")})) return std::nullopt;
  return parse_failure_report(store_->get(key(attempt, "failed"), kSlice * 4));
}

void NodeSync::report_failure(int attempt, const RemoteFailure& failure) {
  if (options_.nnodes == 1) return;
  store_->compare_set(key(attempt, "failed"), "", failure_report(failure));
}

std::optional<RemoteFailure> NodeSync::wait_outcome(int attempt) {
  if (options_.nnodes == 1) return std::nullopt;
  store_->set(key(attempt, "done/" + std::to_string(options_.node_rank)), "1");
  std::vector<std::string> done;
  for (int r = 0; r < options_.nnodes; ++r)
    done.push_back(key(attempt, "done/" + std::to_string(r)));
  milliseconds interval = std::max(options_.monitor_interval, milliseconds(20));
  for (;;) {  // no deadline: the other nodes' ranks may legitimately run for days
    check_signals();
    if (auto failure = check_failure(attempt)) return failure;
    if (store_->check(done)) return std::nullopt;
    std::this_thread::sleep_for(interval);
  }
}

void NodeSync::leave() {
  if (options_.nnodes == 1 || !joined_) return;
  try {
    if (options_.node_rank != 0) {
      store_->add("lockstep_launcher/left", 1);
      return;
    }
    Deadline deadline =
        Deadline::after(std::min(options_.rdzv_timeout, options_.term_timeout + kLeaveGrace));
    while (store_->add("lockstep_launcher/left", 0) < options_.nnodes - 1 && !deadline.expired()) {
      if (!signals_.drain().empty()) return;  // asked again: stop waiting
      std::this_thread::sleep_for(milliseconds(20));
    }
  } catch (const std::exception&) {
    // Leaving is best effort: the outcome is already decided.
  }
}

}  // namespace lockstep::launcher
