// lockstep doctor: the exchange between the doctors of a job's nodes, through the job's store.
// Keys, under the run's prefix:
//   node/<k>        node k's advertised address, its listener's port and its host name
//   reach/<k>       the nodes node k could not connect to, one "<j>\t<reason>" line each
//   clock/ask/<k>   node 0 asks node k for its wall clock; clock/<k> is the answer (ns)
//   clock/skew/<k>  node 0's measure of node k's skew, for node k's own report
//   bye/<k>         node k has printed its report (no node exits before every node's is out)
// Node 0 reads the clocks only after every node has published what it reached, so a node's
// listener is no longer needed once its clock has been read.
// Every wait is bounded: a node that never comes is named in the report, and nothing hangs.
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "cli/doctor_peers.h"
#include "cli/doctor_verdicts.h"
#include "lockstep/core/error.h"
#include "net/bind.h"
#include "net/socket.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;
using std::chrono::milliseconds;

constexpr int kAcceptQueue = 4096;

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "node 2 (host2)".
std::string name_of(const PeerEntry& e) {
  return e.host.empty() ? concat("node ", e.node) : concat("node ", e.node, " (", e.host, ")");
}

std::string list_text(const std::vector<int>& nodes) {
  std::string text;
  for (int n : nodes) text += (text.empty() ? "" : ", ") + std::to_string(n);
  return text;
}

// The value of key, waiting until the deadline; nothing when it did not come (or the store left).
std::optional<std::string> get_until(Store& store, const std::string& key, Deadline deadline) {
  try {
    return store.get(key, std::max(deadline.remaining(), milliseconds(1)));
  } catch (const Error&) {
    return std::nullopt;
  }
}

struct Listener {
  net::Fd fd;
  std::string bind;  // where it listens
  int port = 0;
  std::string error;
};

Listener listen_for_peers(const std::string& advertised) {
  Listener l;
  try {
    l.bind = net::bind_address_for(advertised, "lockstep doctor");
    // Nothing accepts: the kernel completes every node's connection into the accept queue, so
    // the queue must hold one per node (the kernel caps it at net.core.somaxconn).
    l.fd = net::listen_tcp(l.bind, 0, kAcceptQueue);
    l.port = net::local_port(l.fd.get());
  } catch (const Error& e) {
    l.error = e.what();
  }
  return l;
}

void report_advertise(const PeerOptions& o, const Listener& l, Report& report) {
  const std::string source = o.advertised_by_setting
                                 ? "from LOCKSTEP_SOCKET_ADDR"
                                 : "its address toward the store; LOCKSTEP_SOCKET_ADDR overrides";
  const std::string what = concat("node ", o.node_rank, " of ", o.nodes, " advertises ",
                                  o.advertised, " (", source, ")");
  if (!l.error.empty()) {
    report.problem("advertise", concat(what, ", but cannot listen there: ", l.error),
                   "set LOCKSTEP_SOCKET_ADDR (or LOCKSTEP_BIND_ADDR) to an address of this host");
  } else if (is_loopback(o.advertised) && !o.master_is_loopback) {
    report.problem("advertise",
                   concat(what, ", a loopback address: the other nodes cannot reach it"),
                   "set LOCKSTEP_SOCKET_ADDR to this host's address on the network the nodes "
                   "share (`ip -brief addr` lists them)");
  } else {
    report.ok("advertise", concat(what, "; the doctor listens at ", l.bind, ":", l.port));
  }
}

// Waits for every node's entry; reports the ones that did not come. Returns the present ones.
std::vector<PeerEntry> gather_entries(Store& store, const PeerOptions& o, Deadline deadline,
                                      Report& report) {
  std::vector<std::string> keys;
  for (int k = 0; k < o.nodes; ++k) keys.push_back(concat(o.prefix, "node/", k));
  try {
    store.wait(keys, std::max(deadline.remaining(), milliseconds(1)));
  } catch (const Error&) {
    // Reported below, key by key.
  }
  std::vector<PeerEntry> present;
  std::vector<int> missing;
  for (int k = 0; k < o.nodes; ++k) {
    bool here = false;
    try {
      here = store.check({keys[k]});
      if (here) present.push_back(decode_entry(k, store.get(keys[k], milliseconds(1000))));
    } catch (const Error&) {
      here = false;
    }
    if (!here) missing.push_back(k);
  }
  if (!missing.empty())
    report.problem(
        "reachability",
        concat(missing.size() == 1 ? "node " : "nodes ", list_text(missing),
               " did not publish an address within ", o.peer_timeout.count() / 1000.0,
               " s: its doctor did not start, or cannot reach the store"),
        concat("run `lockstep run --nnodes ", o.nodes,
               " --node-rank K ... -- lockstep doctor` on every node within --peer-timeout of "
               "each other, and check the master checks of the missing nodes"));
  return present;
}

// Node 0: reads each node's clock within one store round trip; publishes the skew for the node.
void measure_clocks(Store& store, const PeerOptions& o, const std::vector<PeerEntry>& peers,
                    Deadline deadline, Report& report) {
  for (const PeerEntry& p : peers) {
    if (p.node == o.node_rank) continue;
    const int64_t before = wall_clock_ns();
    std::optional<std::string> answer;
    try {
      store.set(concat(o.prefix, "clock/ask/", p.node), "?");
      answer = get_until(store, concat(o.prefix, "clock/", p.node), deadline);
    } catch (const Error&) {
    }
    const int64_t after = wall_clock_ns();
    if (!answer) {
      report.problem("clock", concat(name_of(p), " did not answer the clock probe in time"),
                     "check that node's own report");
      continue;
    }
    const Skew skew = clock_skew(before, std::atoll(answer->c_str()), after);
    add("clock", skew_verdict(name_of(p), skew, o.clock_limit_s), report);
    try {
      store.set(concat(o.prefix, "clock/skew/", p.node),
                concat(skew.seconds, " ", skew.uncertainty));
    } catch (const Error&) {
    }
  }
}

// Node k > 0: answers node 0's clock probe, then reports the skew node 0 measured.
void answer_clock(Store& store, const PeerOptions& o, Deadline deadline, Report& report) {
  if (!get_until(store, concat(o.prefix, "clock/ask/", o.node_rank), deadline)) {
    report.problem("clock", "node 0 did not ask for this node's clock in time",
                   "check node 0's report");
    return;
  }
  try {
    store.set(concat(o.prefix, "clock/", o.node_rank), std::to_string(wall_clock_ns()));
  } catch (const Error& e) {
    report.problem("clock", concat("cannot answer node 0's clock probe: ", e.what()),
                   "check the master checks above");
    return;
  }
  std::optional<std::string> measured =
      get_until(store, concat(o.prefix, "clock/skew/", o.node_rank), deadline);
  if (!measured) {
    report.note("clock", "node 0 did not publish this node's skew in time: its report has it");
    return;
  }
  Skew skew;
  std::istringstream(*measured) >> skew.seconds >> skew.uncertainty;
  add("clock", skew_verdict(concat("this node (node ", o.node_rank, ")"), skew, o.clock_limit_s),
      report);
}

// "j\treason" lines: the peers a node could not reach.
std::string encode_failures(const std::vector<PeerEntry>& peers,
                            const std::vector<std::string>& reasons) {
  std::string text;
  for (size_t i = 0; i < peers.size(); ++i)
    if (!reasons[i].empty()) text += concat(peers[i].node, "\t", reasons[i], "\n");
  return text;
}

// Node 0: every node's failures, grouped by the node that could not be reached.
void report_all_reachability(Store& store, const PeerOptions& o,
                             const std::vector<PeerEntry>& peers, Deadline deadline,
                             Report& report) {
  std::map<int, const PeerEntry*> by_node;
  for (const PeerEntry& p : peers) by_node[p.node] = &p;
  std::map<int, std::vector<std::pair<int, std::string>>> unreachable;  // target -> (from, why)
  std::vector<int> silent;
  for (const PeerEntry& from : peers) {
    std::optional<std::string> failures =
        get_until(store, concat(o.prefix, "reach/", from.node), deadline);
    if (!failures) {
      silent.push_back(from.node);
      continue;
    }
    std::istringstream lines(*failures);
    for (std::string line; std::getline(lines, line);) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      unreachable[std::atoi(line.substr(0, tab).c_str())].push_back(
          {from.node, line.substr(tab + 1)});
    }
  }
  for (const auto& [target, froms] : unreachable) {
    if (!by_node.count(target)) continue;  // not a node that published an entry
    const PeerEntry& t = *by_node[target];
    std::vector<int> sources;
    for (const auto& f : froms) sources.push_back(f.first);
    report.problem(
        "reachability",
        concat(name_of(t), " advertises ", t.address, ":", t.port, " for data connections, and ",
               sources.size() == 1 ? "node " : "nodes ", list_text(sources),
               " cannot reach it: ", froms.front().second),
        concat("on ", t.host.empty() ? "that node" : t.host,
               ", set LOCKSTEP_SOCKET_ADDR to an address the other nodes can reach (`ip -brief "
               "addr` lists them; unset, it advertises its address toward the master), and let "
               "the ranks' listening ports through its firewall"));
  }
  if (!silent.empty())
    report.problem("reachability",
                   concat(silent.size() == 1 ? "node " : "nodes ", list_text(silent),
                          " did not report what it could reach in time"),
                   "check that node's own report");
  if (unreachable.empty() && silent.empty()) {
    std::string who;
    for (const PeerEntry& p : peers)
      who += concat(who.empty() ? "" : ", ", name_of(p), " ", p.address);
    report.ok("reachability",
              concat("all ", peers.size(),
                     " nodes reach each other at their advertised addresses: ", who));
  }
}

// Node k > 0: the peers this node could not reach.
void report_own_reachability(const std::vector<PeerEntry>& peers,
                             const std::vector<std::string>& reasons, Report& report) {
  bool all = true;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (reasons[i].empty()) continue;
    all = false;
    report.problem("reachability",
                   concat("this node cannot reach ", name_of(peers[i]), " at ", peers[i].address,
                          ":", peers[i].port, ": ", reasons[i]),
                   "node 0's report names the address to fix");
  }
  if (all)
    report.ok("reachability", concat("this node reaches the ", peers.size() - 1,
                                     " other node(s) at their advertised addresses"));
}

}  // namespace

std::vector<int> exchange_with_peers(Store& store, const PeerOptions& o, Report& report) {
  const Listener listener = listen_for_peers(o.advertised);
  report_advertise(o, listener, report);
  try {
    store.set(concat(o.prefix, "node/", o.node_rank),
              encode({o.node_rank, o.advertised, listener.port, net::hostname()}));
  } catch (const Error& e) {
    report.problem("reachability", concat("cannot publish this node's address: ", e.what()),
                   "check the master checks above");
    return {};
  }
  const std::vector<PeerEntry> peers =
      gather_entries(store, o, Deadline::after(o.peer_timeout), report);
  const std::vector<std::string> reasons = probe_peers(peers, o.node_rank, o.probe_timeout);
  try {
    store.set(concat(o.prefix, "reach/", o.node_rank), encode_failures(peers, reasons));
  } catch (const Error&) {
    // Node 0 reports the silence.
  }
  std::vector<int> nodes;
  for (const PeerEntry& p : peers) nodes.push_back(p.node);
  if (o.node_rank == 0) {
    report_all_reachability(store, o, peers, Deadline::after(o.peer_timeout), report);
    measure_clocks(store, o, peers, Deadline::after(o.peer_timeout), report);
    return nodes;
  }
  report_own_reachability(peers, reasons, report);
  // Node 0 asks after it has gathered every node's reach/ key (a peer timeout) and the clocks of
  // the nodes before this one (another).
  answer_clock(store, o, Deadline::after(3 * o.peer_timeout + o.probe_timeout), report);
  return nodes;
}

void finish_with_peers(Store& store, const PeerOptions& o, const std::vector<int>& nodes) {
  if (nodes.empty()) return;
  try {
    store.set(concat(o.prefix, "bye/", o.node_rank), "1");
  } catch (const Error&) {
    // The others wait for it until the peer timeout.
  }
  // A node whose store left (node 0 hosted it and saw every bye) has nothing more to wait for.
  const Deadline deadline = Deadline::after(o.peer_timeout);
  for (int k : nodes)
    if (k != o.node_rank) get_until(store, concat(o.prefix, "bye/", k), deadline);
}

}  // namespace lockstep::cli::doctor
