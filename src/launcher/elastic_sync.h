// ElasticSync: the rendezvous of an elastic job (`lockstep run --nnodes MIN:MAX`), through the
// TcpStore that one of its launchers hosts. docs/launcher.md ([Elastic jobs]) has the rules.
//
// [Host] The launcher on the host named by --master-addr that binds --master-port first hosts the
// store (a launcher whose host lacks that address, or that finds the port taken, is a client). It
// is node 0 of every attempt, decides every round, and picks MASTER_PORT; the job ends when it
// does (when it dies, the others end with an error naming its store).
//
// [Rounds] Attempt N of the job is round N of the rendezvous. Keys, under lockstep_launcher/:
//   elastic/next_id                 counter: each launcher's id, unique in the job
//   elastic/round                   the latest round the host opened
//   elastic/r<N>/count              counter: registrations for round N
//   elastic/r<N>/n/<k>              the k-th registration (elastic_records.h: ElasticNode)
//   elastic/r<N>/closed             the host's decision: who is in round N (ElasticRound)
//   elastic/lease/<id>              counter that launcher id's LeaseKeeper renews
//   elastic/gone/<id>               launcher id has exited
//   a<N>/failed, a<N>/done/<r>      as for fixed jobs (node_sync.h); a<N>/done_count counts them
//   a<N>/left/<r>                   node r has read the final outcome
// The host closes round N when MAX nodes (itself included) have registered, or when at least MIN
// have and --rdzv-last-call has passed since the last arrival and every member of round N-1 has
// registered again or is gone. Those registered beyond MAX, or after the close, register for round
// N+1; while round N runs with fewer than MAX nodes and none has finished, any registration for
// N+1 ends it as a membership change (the restart does not count against --max-restarts).
//
// [Gone] A launcher whose lease has not moved for --rdzv-keep-alive (on the watcher's clock), or
// that wrote elastic/gone, is gone: the others stop their ranks, report it as the attempt's
// failure naming the node, and re-form without it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/elastic_lease.h"
#include "launcher/elastic_records.h"
#include "launcher/rendezvous.h"
#include "lockstep/core/deadline.h"

namespace lockstep {
class TcpStoreServer;
}  // namespace lockstep

namespace lockstep::launcher {

class ElasticSync : public Rendezvous {
 public:
  // Hosts the store when it can ([Host]), else connects to it, retrying until --rdzv-timeout
  // (TimeoutError naming the address).
  ElasticSync(const LaunchOptions& options, SignalCatcher& signals);
  ~ElasticSync() override;  // writes elastic/gone (best effort)

  int store_port() const override;
  TcpStore& store() override;
  bool hosts_store() const override { return server_ != nullptr; }
  bool multi_node() const override { return true; }
  // The round after `previous` that admits this node. The host: TimeoutError when fewer than MIN
  // nodes arrived within --rdzv-timeout, naming how many did. Another node: TimeoutError when it
  // was not admitted within --rdzv-timeout (the job stayed full), Error when the store's host is
  // gone.
  WorldLayout join(int previous) override;
  // A failure reported for the attempt; else a member found gone, or nodes waiting to join
  // ([Rounds]), which this call reports for everyone.
  std::optional<RemoteFailure> check_failure(int attempt) override;
  void report_failure(int attempt, const RemoteFailure& failure) override;
  std::optional<RemoteFailure> wait_outcome(int attempt) override;
  void leave() override;

 private:
  // elastic_round.cc: the two sides of a round.
  ElasticRound host_round(int round);
  ElasticRound joiner_round(int round);
  void read_registrations(int round, int64_t count, std::vector<ElasticNode>& joined, int& seen);
  bool previous_members_settled(const std::vector<ElasticNode>& joined);
  int next_restart_count(int round);

  bool try_to_host();
  void connect();
  void check_signals();
  bool wait_keys(const std::vector<std::string>& keys, Deadline deadline);
  std::optional<RemoteFailure> first_report(int attempt, const RemoteFailure& mine);
  std::optional<RemoteFailure> find_gone_member(int attempt);
  bool member_gone(const ElasticNode& member);
  [[noreturn]] void lost_store(const std::exception& e, const char* during) const;
  ElasticNode self() const;

  const LaunchOptions& options_;
  SignalCatcher& signals_;
  std::string run_id_;
  std::string host_;
  int id_ = -1;
  std::unique_ptr<TcpStoreServer> server_;
  std::string store_host_;  // where this launcher reaches the store
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<LeaseKeeper> lease_;
  LeaseWatch watch_;
  std::optional<ElasticRound> round_;  // the round this node is in
  std::optional<ElasticRound> last_;   // the host: the previous round
  bool said_waiting_ = false;
};

}  // namespace lockstep::launcher
