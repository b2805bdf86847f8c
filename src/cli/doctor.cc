// lockstep doctor: checks what a job needs before it starts, one line per check, and exits
// non-zero when any check finds a problem. Run it the way the job will run, e.g.
//   lockstep run --nproc-per-node 4 -- lockstep doctor
// so that every rank checks its own variables, host and devices.
//
// Exit codes: 0 no problem (notes are fine), 1 at least one problem, 2 a usage error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/doctor_checks.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::cli {
namespace {

constexpr const char* kUsage =
    "usage: lockstep doctor [--probe-timeout SECONDS] [--peer-timeout SECONDS] [--peers]\n"
    "\n"
    "Checks what a job needs before it starts and prints one line per check: 'ok', 'note', or\n"
    "'problem' with its fix. It reads the launcher's variables like a rank does, so run it the "
    "way\n"
    "the job will run:\n"
    "  lockstep run --nproc-per-node 4 -- lockstep doctor\n"
    "  MASTER_ADDR=node0 MASTER_PORT=29500 RANK=1 WORLD_SIZE=8 LOCAL_WORLD_SIZE=4 lockstep doctor\n"
    "\n"
    "checks: the launcher variables and their consistency, host name and MASTER_ADDR resolution,\n"
    "master reachability, whether MASTER_PORT is free, /dev/shm, cores and OMP_NUM_THREADS, the\n"
    "open-file limit, visible GPUs, and the backends, NCCL and MPI available. In a job of several\n"
    "nodes, run on every node under lockstep run, it also checks that each node's advertised\n"
    "address is reachable from every other node and that the nodes' clocks agree:\n"
    "  lockstep run --nnodes 3 --node-rank K --master-addr node0 -- lockstep doctor\n"
    "With the variables set by hand or by srun, add --peers on every node: rank 0's doctor then\n"
    "hosts a store at MASTER_ADDR:MASTER_PORT for the check, as rank 0 of the job would.\n"
    "\n"
    "options:\n"
    "  --probe-timeout SECONDS  how long a name lookup or connection attempt may take (default 2)\n"
    "  --peer-timeout SECONDS   how long to wait for the other nodes' doctors (default 30)\n"
    "  --peers                  meet the other nodes without lockstep run (see above)\n"
    "  --help                   this text\n"
    "\n"
    "exit code: 0 no problem, 1 a problem was found, 2 usage error\n";

std::chrono::milliseconds parse_seconds(std::string_view option, std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0) || v > 600)
    throw ConfigError(std::string(option) + " '" + s + "' is not a number of seconds in (0, 600]");
  return std::chrono::milliseconds(static_cast<long long>(v * 1000));
}

}  // namespace

int doctor_command(int argc, char** argv) {
  std::chrono::milliseconds probe_timeout(2000);
  std::chrono::milliseconds peer_timeout(30000);
  bool peers = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--help" || a == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (a == "--probe-timeout" && i + 1 < argc) {
        probe_timeout = parse_seconds(a, argv[++i]);
      } else if (a.rfind("--probe-timeout=", 0) == 0) {
        probe_timeout = parse_seconds("--probe-timeout", a.substr(16));
      } else if (a == "--peers") {
        peers = true;
      } else if (a == "--peer-timeout" && i + 1 < argc) {
        peer_timeout = parse_seconds(a, argv[++i]);
      } else if (a.rfind("--peer-timeout=", 0) == 0) {
        peer_timeout = parse_seconds("--peer-timeout", a.substr(15));
      } else {
        throw ConfigError("unknown argument '" + std::string(a) + "' (see lockstep doctor --help)");
      }
    }
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "lockstep doctor: %s\n", e.what());
    return 2;
  }
  doctor::Report report;
  const doctor::Job job = doctor::check_variables(report);
  doctor::check_network(job, probe_timeout, report);
  const std::function<void()> reported =
      doctor::check_nodes(job, probe_timeout, peer_timeout, peers, report);
  doctor::check_shared_memory(job, report);
  doctor::check_cores(job, report);
  doctor::check_open_files(job, report);
  doctor::check_gpus(job, report);
  doctor::check_libraries(report);
  std::string who = job.valid ? "rank " + std::to_string(job.rendezvous.rank) + " of " +
                                    std::to_string(job.rendezvous.world_size)
                              : std::string("a process");
  std::printf("lockstep doctor: %s on host %s\n", who.c_str(), net::hostname().c_str());
  report.print(stdout);
  std::fflush(stdout);
  reported();  // no doctor exits (a launcher would stop the others) before every report is out
  return report.problems() == 0 ? 0 : 1;
}

}  // namespace lockstep::cli
