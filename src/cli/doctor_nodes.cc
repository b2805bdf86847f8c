// lockstep doctor: the checks between the nodes of a multi-node job. Local rank 0 of every node
// meets the others in a store and runs the exchange of doctor_peers.cc: under `lockstep run
// --nnodes N` the launcher's store; with --peers (variables set by hand, or by srun) one that rank
// 0's doctor hosts at MASTER_ADDR:MASTER_PORT, as rank 0 of the job would. Otherwise a note says
// how to run it.
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "cli/doctor_checks.h"
#include "cli/doctor_peers.h"
#include "cli/doctor_verdicts.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;

std::string setting_or(LiveSetting setting, const std::string& fallback) {
  return live_setting(setting).value_or(fallback);
}

// LOCKSTEP_SOCKET_ADDR as the job's ranks read it ("" when a setting is malformed: check_settings
// reports that).
std::string advertised_address() {
  try {
    return settings().socket_addr;
  } catch (const ConfigError&) {
    return "";
  }
}

std::string how_to_run(int nodes) {
  return concat("on every node: lockstep run --nnodes ", nodes,
                " --node-rank K --master-addr <node 0's address> -- lockstep doctor");
}

}  // namespace

std::function<void()> check_nodes(const Job& job, std::chrono::milliseconds probe_timeout,
                                  std::chrono::milliseconds peer_timeout, bool peers,
                                  Report& report) {
  const auto nothing = [] {};
  if (!job.valid || job.nodes <= 1) return nothing;
  if (job.local_rank != 0) {
    report.ok("reachability", concat("local rank 0 of this node checks reachability and clocks "
                                     "with the other ",
                                     job.nodes - 1, " node(s)"));
    return nothing;
  }
  const std::optional<std::string> store_port = live_setting(LiveSetting::store_port);
  const bool launcher_store = store_port.has_value();
  const EnvRendezvous& rv = job.rendezvous;
  if (!launcher_store && (!peers || rv.master_addr.empty() || rv.master_port == 0)) {
    report.note("reachability",
                concat("a ", job.nodes,
                       "-node job: whether the nodes reach each other, and their clocks, are "
                       "checked when every node runs the doctor under lockstep run, or with "
                       "--peers (and MASTER_ADDR, MASTER_PORT)"),
                how_to_run(job.nodes) +
                    "\nor, with the variables set by hand or by srun: lockstep doctor --peers");
    return nothing;
  }
  const std::string host =
      launcher_store ? setting_or(LiveSetting::store_addr, rv.master_addr) : rv.master_addr;
  const int port = launcher_store ? std::atoi(store_port->c_str()) : rv.master_port;
  const bool host_it = !launcher_store && rv.rank == 0;
  std::shared_ptr<TcpStore> store;  // kept (this process may host it) until the report is out
  try {
    // Without the launcher, the others wait for rank 0's doctor to open its store.
    store = std::make_shared<TcpStore>(
        TcpStoreOptions{.host = host,
                        .port = static_cast<uint16_t>(port),
                        .is_server = host_it,
                        .timeout = launcher_store ? probe_timeout : peer_timeout});
  } catch (const Error& e) {
    report.problem("reachability",
                   concat("cannot meet the other nodes: ",
                          host_it ? "cannot open a store at " : "no store answers at ", host, ":",
                          port, ": ", e.what()),
                   launcher_store
                       ? "check the master line above, and that lockstep run on node 0 is running"
                       : "check the master and port lines above, and run lockstep doctor --peers "
                         "on every node within --peer-timeout of each other");
    return nothing;
  }
  PeerOptions o;
  o.prefix = launcher_store ? concat("lockstep/doctor/", setting_or(LiveSetting::run_id, "run"),
                                     "/", setting_or(LiveSetting::attempt, "0"), "/")
                            : std::string("lockstep/doctor/");
  o.nodes = job.nodes;
  o.node_rank = job.node_rank;
  o.advertised = advertised_address();
  o.advertised_by_setting = !o.advertised.empty();
  if (o.advertised.empty()) o.advertised = store->local_address();
  o.master_is_loopback = names_this_machine_only(rv.master_addr);
  o.probe_timeout = probe_timeout;
  o.peer_timeout = peer_timeout;
  const std::vector<int> nodes = exchange_with_peers(*store, o, report);
  return [store, o, nodes] { finish_with_peers(*store, o, nodes); };
}

}  // namespace lockstep::cli::doctor
