// The records that the launchers of a multi-node job write to node 0's store (node_sync.h has the
// keys), as pure functions of their text: what NodeSync writes and how it reads back what the
// other nodes wrote (outside input: another lockstep version, or not a launcher at all), so that
// the reading can be tested and fuzzed without a store.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/attempt.h"

namespace lockstep::launcher {

struct NodeInfo {
  std::string host;
  int nproc = 0;
  int max_restarts = 0;
};

// Where this node's ranks sit in one attempt's world.
struct WorldLayout {
  int rank_offset = 0;  // global rank of this node's local rank 0
  int world_size = 0;
  std::string run_id;   // node 0's
  int master_port = 0;  // MASTER_PORT for this attempt: free on node 0 when it was picked
  std::vector<NodeInfo> nodes;
  // The attempt's number, this node's rank among the nodes (GROUP_RANK), and the restarts after
  // failures before it (TORCHELASTIC_RESTART_COUNT). A fixed --nnodes N job: the attempt asked
  // for, --node-rank, and the attempt number. An elastic job: what its rendezvous decided (its
  // restarts for membership changes do not count).
  int attempt = 0;
  int node_rank = 0;
  int restart_count = 0;
};

// Node r's registration for an attempt: "host \t nproc \t max_restarts \t run_id", and node 0
// adds "\t master_port".
std::string node_entry(const NodeInfo& node, const std::string& run_id,
                       std::optional<int> master_port);

// The attempt's layout as node `node_rank` sees it, from every node's entry (by node rank).
// StoreError naming the node for a malformed entry (a missing field, or a number that is not one,
// or outside what `lockstep run` accepts); ConfigError when a node runs with another
// --max-restarts than `max_restarts`.
WorldLayout parse_world_layout(const std::vector<std::string>& entries, int node_rank,
                               int max_restarts);

// The first failure of an attempt: "node \t exit code \t what \t restartable (1 or 0)", with the
// tabs and line breaks of `what` made spaces (it is one field); a membership change (elastic
// jobs) adds "\t membership".
std::string failure_report(const RemoteFailure& failure);

// Reads a failure report back. A malformed one (too few fields, a node or exit code that is not a
// number) still ends the attempt: it reads as a failure of node 0 with exit code 1 that says so
// and quotes it.
RemoteFailure parse_failure_report(const std::string& text);

}  // namespace lockstep::launcher
