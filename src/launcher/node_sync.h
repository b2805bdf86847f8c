// NodeSync: how the launchers of a multi-node job find and follow each other, through the
// TcpStore that node 0's launcher hosts (and that lockstep ranks use too, via
// LOCKSTEP_STORE_PORT). MASTER_PORT is another port: node 0 picks a free one for each attempt,
// for the script's own store (torch's TCPStore, hosted by rank 0), and tells the other nodes.
//
// [Attempts] Everything is keyed by attempt number, so nodes agree on each attempt:
//   lockstep_launcher/a<N>/node/<r>   node r's "host \t nproc \t max_restarts \t run_id"
//                                     (node 0 adds "\t master_port")
//   lockstep_launcher/a<N>/failed     first failure of attempt N:
//                                     "node \t exit code \t what \t restartable (1 or 0)"
//   lockstep_launcher/a<N>/done/<r>   node r's ranks all succeeded in attempt N
//   lockstep_launcher/left            nodes (other than 0) that have read the final outcome
// An attempt ends for every node when one node reports a failure (all stop, and restart if
// --max-restarts allows), or when every node is done. Node 0 keeps the store up until the others
// have read the outcome.
//
// With one node there is no client: join() and the rest are trivial, but the server still runs
// for the ranks. Blocking calls take slices of at most ~0.5 s so that a termination signal
// (SignalCatcher) interrupts them with Interrupted. Main thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rendezvous.h"
#include "lockstep/core/deadline.h"

namespace lockstep {
class TcpStoreServer;
}  // namespace lockstep

namespace lockstep::launcher {

class NodeSync : public Rendezvous {
 public:
  // Node 0 starts the store server (NetworkError naming the port when it is taken); every node
  // of a multi-node job then connects to it, retrying until --rdzv-timeout (TimeoutError naming
  // the address and the last error).
  NodeSync(const LaunchOptions& options, SignalCatcher& signals);
  ~NodeSync() override;

  // The port of the launcher's store (LOCKSTEP_STORE_PORT); the chosen one when --master-port
  // is 0.
  int store_port() const override;
  // A client of the launcher's store (node 0 connects to itself). For reading what the ranks
  // wrote there; throws what TcpStore throws.
  TcpStore& store() override;
  bool hosts_store() const override { return server_ != nullptr; }
  bool multi_node() const override { return options_.nnodes > 1; }
  // Registers this node for attempt previous + 1 and waits for every node. At --rdzv-timeout
  // throws TimeoutError naming the node ranks that never arrived. ConfigError when the nodes
  // disagree about --max-restarts.
  WorldLayout join(int previous) override;
  // The failure another node reported for this attempt, if any. Never waits.
  std::optional<RemoteFailure> check_failure(int attempt) override;
  // Reports this node's failure; the first report of an attempt wins.
  void report_failure(int attempt, const RemoteFailure& failure) override;
  // After this node's ranks all succeeded: waits until every node succeeded (nullopt) or one
  // failed (its report).
  std::optional<RemoteFailure> wait_outcome(int attempt) override;
  // Before exiting. Node 0 waits (bounded) for the other nodes to read the outcome.
  void leave() override;

 private:
  void connect();
  bool wait_keys(const std::vector<std::string>& keys, Deadline deadline);
  // The node ranks whose key of `keys` (one per node) is not in the store yet.
  std::vector<int> missing_nodes(const std::vector<std::string>& keys);
  void check_signals();

  const LaunchOptions& options_;
  SignalCatcher& signals_;
  std::string run_id_;
  std::string host_;
  bool joined_ = false;
  std::unique_ptr<TcpStoreServer> server_;
  std::string own_store_host_ = "127.0.0.1";  // where node 0 reaches its own store
  std::unique_ptr<TcpStore> store_;           // with one node: made on first use by store()
};

}  // namespace lockstep::launcher
