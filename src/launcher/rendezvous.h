// Rendezvous: how the launchers of a job find each other for each attempt and follow each
// other's outcome. Two kinds: NodeSync (node_sync.h) for a fixed --nnodes N, and ElasticSync
// (elastic_sync.h) for --nnodes MIN:MAX. Main thread only; blocking calls throw Interrupted when
// a termination signal arrives.
#pragma once

#include <memory>
#include <optional>

#include "launcher/attempt.h"
#include "launcher/node_sync_records.h"
#include "launcher/options.h"
#include "lockstep/core/error.h"

namespace lockstep {
class TcpStore;
}  // namespace lockstep

namespace lockstep::launcher {

class SignalCatcher;

// A termination signal arrived while the launcher was waiting for other nodes.
class Interrupted : public Error {
 public:
  explicit Interrupted(int sig) : Error("interrupted by a signal"), signal(sig) {}
  int signal;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // The port of the launcher's store (LOCKSTEP_STORE_PORT).
  virtual int store_port() const = 0;
  // A client of the launcher's store, for reading what the ranks wrote there.
  virtual TcpStore& store() = 0;
  // Whether this launcher hosts the store (then the job cannot go on without it).
  virtual bool hosts_store() const = 0;
  // Whether the job spans several nodes (the others' failures must be watched).
  virtual bool multi_node() const = 0;
  // Joins the attempt after `previous` (-1 for the first): waits for the other nodes and returns
  // where this node's ranks sit. TimeoutError at --rdzv-timeout naming who never arrived.
  virtual WorldLayout join(int previous) = 0;
  // The failure another node reported for this attempt, if any. Never waits long.
  virtual std::optional<RemoteFailure> check_failure(int attempt) = 0;
  // Reports this node's failure; the first report of an attempt wins.
  virtual void report_failure(int attempt, const RemoteFailure& failure) = 0;
  // After this node's ranks all succeeded: waits until every node succeeded (nullopt) or one
  // failed (its report).
  virtual std::optional<RemoteFailure> wait_outcome(int attempt) = 0;
  // Before exiting. The store's host waits (bounded) for the other nodes to read the outcome.
  virtual void leave() = 0;
};

// NodeSync or ElasticSync, as the options ask.
std::unique_ptr<Rendezvous> make_rendezvous(const LaunchOptions& options, SignalCatcher& signals);

}  // namespace lockstep::launcher
