// lockstep doctor: the checks between the nodes of a multi-node job. Under `lockstep run --nnodes
// N`, local rank 0 of every node meets the others in the launcher's store and runs the exchange of
// doctor_peers.cc; without the launcher's store there is nothing to meet in, and a note says how
// to run it.
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/doctor_checks.h"
#include "cli/doctor_peers.h"
#include "cli/doctor_verdicts.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string how_to_run(int nodes) {
  return concat("on every node: lockstep run --nnodes ", nodes,
                " --node-rank K --master-addr <node 0's address> -- lockstep doctor");
}

}  // namespace

void check_nodes(const Job& job, std::chrono::milliseconds probe_timeout,
                 std::chrono::milliseconds peer_timeout, Report& report) {
  if (!job.valid || job.nodes <= 1) return;
  if (job.local_rank != 0) {
    report.ok("reachability", concat("local rank 0 of this node checks reachability and clocks "
                                     "with the other ",
                                     job.nodes - 1, " node(s)"));
    return;
  }
  const char* store_port = std::getenv("LOCKSTEP_STORE_PORT");
  if (!store_port || !*store_port) {
    report.note("reachability",
                concat("a ", job.nodes,
                       "-node job: whether the nodes reach each other, and their clocks, are "
                       "checked only when every node runs the doctor under lockstep run"),
                how_to_run(job.nodes));
    return;
  }
  const std::string host = env_or("LOCKSTEP_STORE_ADDR", job.rendezvous.master_addr);
  const int port = std::atoi(store_port);
  std::unique_ptr<TcpStore> store;
  try {
    store = std::make_unique<TcpStore>(TcpStoreOptions{
        .host = host, .port = static_cast<uint16_t>(port), .timeout = probe_timeout});
  } catch (const Error& e) {
    report.problem("reachability",
                   concat("cannot meet the other nodes: the launcher's store at ", host, ":", port,
                          " does not answer: ", e.what()),
                   "check the master line above, and that lockstep run on node 0 is running");
    return;
  }
  PeerOptions o;
  o.prefix = concat("lockstep/doctor/", env_or("LOCKSTEP_RUN_ID", "run"), "/",
                    env_or("LOCKSTEP_ATTEMPT", "0"), "/");
  o.nodes = job.nodes;
  o.node_rank = job.node_rank;
  o.advertised = env_or("LOCKSTEP_SOCKET_ADDR", "");
  o.advertised_by_setting = !o.advertised.empty();
  if (o.advertised.empty()) o.advertised = store->local_address();
  o.master_is_loopback = names_this_machine_only(job.rendezvous.master_addr);
  o.probe_timeout = probe_timeout;
  o.peer_timeout = peer_timeout;
  exchange_with_peers(*store, o, report);
}

}  // namespace lockstep::cli::doctor
