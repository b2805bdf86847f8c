// lockstep doctor's multi-node checks, between the doctors of every node of one job, through the
// job's store (docs/diagnostics.md#checks-between-nodes):
//   advertise     the address this node gives its peers for data connections, and a listener on it
//   reachability  every node connects to every other node's advertised address
//   clock         node 0 reads every other node's wall clock within one store round trip
// Only local rank 0 of each node takes part; every wait is bounded by the peer timeout.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/doctor_checks.h"
#include "lockstep/store/store.h"

namespace lockstep::cli::doctor {

// What a node publishes under "<prefix>node/<k>".
struct PeerEntry {
  int node = 0;
  std::string address;  // advertised, as peers should dial it
  int port = 0;         // of the doctor's listener; 0 when it could not listen
  std::string host;     // host name, for the report
};

std::string encode(const PeerEntry& e);
PeerEntry decode_entry(int node, const std::string& text);

// Connects to every entry other than `self`'s, in parallel, each attempt bounded by `timeout`.
// Returns, per entry, "" when it connected or the reason it did not.
std::vector<std::string> probe_peers(const std::vector<PeerEntry>& peers, int self,
                                     std::chrono::milliseconds timeout);

// The whole exchange for this node, on a connected store; adds its lines to the report. Returns
// the nodes that took part (none when this node could not).
struct PeerOptions {
  std::string prefix;  // store keys of this doctor run, ending in '/'
  int nodes = 1;
  int node_rank = 0;
  std::string advertised;  // LOCKSTEP_SOCKET_ADDR, else the store connection's local address
  bool advertised_by_setting = false;
  bool master_is_loopback = false;
  std::chrono::milliseconds probe_timeout{2000};
  std::chrono::milliseconds peer_timeout{30000};
  double clock_limit_s = 1.0;
};
std::vector<int> exchange_with_peers(Store& store, const PeerOptions& options, Report& report);
// Once this node's report is printed: says so, and waits (at most the peer timeout) until every
// other node in `nodes` has printed its own. A doctor that found a problem exits non-zero, and a
// launcher then stops the ranks of every node: a report still to come would be lost (node 0's,
// which names what the others found, lost to whichever node failed first). Node 0, which may
// host the store, also keeps it until then.
void finish_with_peers(Store& store, const PeerOptions& options, const std::vector<int>& nodes);

}  // namespace lockstep::cli::doctor
