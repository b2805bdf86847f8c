// The checks of `lockstep doctor`: what a job needs before it starts. Each check adds lines to a
// Report ("ok", "note", or "problem" with a fix); a check never throws for what it finds, and
// none waits longer than its probe timeout. docs/diagnostics.md lists them.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "group/rendezvous_env.h"
#include "lockstep/group/init.h"

namespace lockstep::cli::doctor {

enum class Status { ok, note, problem };  // doctor_report.cc prints them in this order

struct Line {
  Status status = Status::ok;
  std::string topic;  // "variables", "master", "port", "/dev/shm", ...
  std::string text;   // what was found
  std::string fix;    // what to do (problems, and some notes)
};

class Report {
 public:
  void ok(std::string topic, std::string text);
  void note(std::string topic, std::string text, std::string fix = {});
  void problem(std::string topic, std::string text, std::string fix);
  int problems() const;
  // One line per check ("ok      topic: text"), the fix indented under it, and a summary.
  void print(std::FILE* out) const;

 private:
  std::vector<Line> lines_;
};

// What the checks know about the job, from the launcher's variables.
struct Job {
  bool launched = false;     // some launcher variable is set
  bool valid = false;        // read_rendezvous accepted them
  EnvRendezvous rendezvous;  // valid only when `valid`
  bool agent_store = false;  // LOCKSTEP_USE_AGENT_STORE=1: `lockstep run` hosts the store
  int local_processes = 1;   // ranks on this host: LOCAL_WORLD_SIZE, else 1
  int world_size = 1;        // WORLD_SIZE when valid, else 1
  int nodes = 1;             // nodes of the job (doctor_verdicts.h node_shape), when valid
  int node_rank = 0;         // this process's node
  int local_rank = 0;        // LOCAL_RANK, else 0
  // Whether this process will host the TCP store (rank 0 without a launcher's store).
  bool hosts_store() const { return valid && rendezvous.rank == 0 && !agent_store; }
};

// doctor_job.cc: the launcher variables and their consistency, and the LOCKSTEP_* settings.
Job check_variables(Report& report);
// doctor_network.cc: host name resolution, MASTER_ADDR resolution and reachability, and whether
// MASTER_PORT is free (for the process that will open it). Probes wait at most probe_timeout.
void check_network(const Job& job, std::chrono::milliseconds probe_timeout, Report& report);
// doctor_nodes.cc: with several nodes, under `lockstep run` (or with `peers`: rank 0's doctor
// hosts a store at MASTER_ADDR:MASTER_PORT), local rank 0 of every node checks with the others
// that each node's advertised address is reachable from every other node and that the clocks
// agree within a second (doctor_peers.h). Waits for the other nodes at most peer_timeout per
// phase; connection attempts at most probe_timeout. Returns what to call once this node's report
// is printed (finish_with_peers; nothing to do when this node took no part).
std::function<void()> check_nodes(const Job& job, std::chrono::milliseconds probe_timeout,
                                  std::chrono::milliseconds peer_timeout, bool peers,
                                  Report& report);
// doctor_host.cc: /dev/shm size and free space, cores against local ranks and OMP_NUM_THREADS,
// and the open-file limit.
void check_shared_memory(const Job& job, Report& report);
void check_cores(const Job& job, Report& report);
void check_open_files(const Job& job, Report& report);
// doctor_devices.cc: visible GPUs, this build's backends, and whether NCCL and MPI are installed.
void check_gpus(const Job& job, Report& report);
void check_libraries(Report& report);

}  // namespace lockstep::cli::doctor
