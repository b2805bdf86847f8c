// Every LOCKSTEP_* environment setting, read in one place (docs/settings.md has the table).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace lockstep {

enum class DebugLevel { off, info, detail };

struct Settings {
  // LOCKSTEP_TIMEOUT (seconds, may be fractional): default deadline of every collective and store
  // call. Default 300.
  std::chrono::milliseconds timeout{300'000};
  // LOCKSTEP_DEBUG: OFF (default), INFO or DETAIL (docs/diagnostics.md).
  DebugLevel debug = DebugLevel::off;
  // LOCKSTEP_DEBUG_EVERY: with INFO or DETAIL, DDP logs its iteration timings every this many
  // iterations. Default 100.
  int debug_every = 100;
  // LOCKSTEP_SOCKET_ADDR: the address this process advertises to peers for data connections.
  // Empty: the address this host uses to reach the store, else the hostname's address.
  std::string socket_addr;
  // LOCKSTEP_BIND_ADDR: the address every listener of this process binds (the store it hosts, the
  // data-plane listeners). Empty: the address each advertises, when this host has it (loopback
  // for a job on 127.0.0.1), else every interface.
  std::string bind_addr;
  // LOCKSTEP_TRACE_DIR: where flight-recorder dumps go. Default ./lockstep-trace.
  std::string trace_dir = "lockstep-trace";
  // LOCKSTEP_FLIGHT_RECORDER_SIZE: how many of its last ops each group keeps for its dump.
  // Default 2000. 0 turns the flight recorder and the watchdog off.
  int flight_recorder_size = 2000;
  // LOCKSTEP_STALL_WARNING_S (seconds): an op in flight this long logs a warning naming the ranks
  // it waits for. 0 (default): min(60 s, the group's timeout / 2).
  std::chrono::milliseconds stall_warning{0};
  // LOCKSTEP_NCCL_NONBLOCKING (0 or 1): create nccl communicators non-blocking, so that init,
  // ncclGroupEnd and finalize return at once and lockstep bounds their waits by the deadline.
  // Default 0 (blocking, as PyTorch): NCCL 2.28 runs every call of a non-blocking communicator
  // through a group thread, which may add latency per op (docs/nccl.md).
  bool nccl_nonblocking = false;
  // LOCKSTEP_LINK_TIMEOUT (seconds, may be fractional; 0: off): how long a TCP connection of this
  // process (data plane, store, launcher) may go without the peer's host acknowledging anything
  // before it fails as unreachable: a link that went down silently, a host that vanished, a
  // partition. Kernel keepalive probes and TCP_USER_TIMEOUT do it, so a peer process that is only
  // slow or stopped (its kernel still answers) is never taken for dead. Default 10.
  std::chrono::milliseconds link_timeout{10'000};
};

// The settings of this process, read from the environment on first use. A malformed value throws
// ConfigError naming the variable.
const Settings& settings();

// The settings that are read afresh at every use instead: a launcher sets them for its workers,
// a test changes them between uses within one process, or only one tool reads them, when it runs.
enum class LiveSetting {
  // LOCKSTEP_SECRET: the job's secret (docs/security.md).
  secret,
  // LOCKSTEP_SECRET_FILE: a file holding it, read when LOCKSTEP_SECRET is not set.
  secret_file,
  // LOCKSTEP_HOST_ID: a test hook that replaces this host's identity; one value, or a
  // comma-separated list with one value per rank (src/backends/hier/hosts.cc).
  host_id,
  // LOCKSTEP_PYTHON: the interpreter lockstep run uses for a .py script or -m.
  python,
  // LOCKSTEP_EXPLAIN_SIGNATURES: the failure signatures file lockstep explain reads.
  explain_signatures,
  // Set by lockstep run for its workers (the rendezvous reads them through its own lookup, by
  // these names): the launcher's store, and the job's run id and attempt number.
  store_addr,
  store_port,
  run_id,
  attempt,
  // Whether LOCKSTEP_TIMEOUT is set at all (torch's backend API then yields to it).
  timeout,
};
// "LOCKSTEP_SECRET", ...
const char* setting_name(LiveSetting setting);
// The variable's value now; nullopt when it is unset or empty.
std::optional<std::string> live_setting(LiveSetting setting);

}  // namespace lockstep
