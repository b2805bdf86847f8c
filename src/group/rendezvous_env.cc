// read_rendezvous: where this process sits in the job, from explicit options, the launcher's
// variables (RANK, WORLD_SIZE, ...), Slurm's or Open MPI's. Every problem is collected and
// reported in one ConfigError.
#include <cstdlib>
#include <string>
#include <vector>

#include "group/optional_backends.h"
#include "group/rendezvous_env.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"

namespace lockstep {

namespace {

class Problems {
 public:
  void add(std::string p) { list_.push_back(std::move(p)); }
  bool empty() const { return list_.empty(); }
  [[noreturn]] void raise(const std::string& method) const {
    std::string msg = "init_process_group(" + method + "): " + std::to_string(list_.size()) +
                      (list_.size() == 1 ? " problem" : " problems") + " with the setup:\n";
    for (const auto& p : list_) msg += "  - " + p + "\n";
    msg +=
        "Start the job with the launcher, which sets all of them:\n"
        "  lockstep run --nproc-per-node N PROGRAM [ARGS...]\n"
        "or set them yourself, e.g.:\n"
        "  MASTER_ADDR=host0 MASTER_PORT=29500 RANK=0 WORLD_SIZE=2 PROGRAM";
    throw ConfigError(msg);
  }

 private:
  std::vector<std::string> list_;
};

// Parses an integer variable into out; records a problem when present but malformed or below min.
void read_int(const EnvLookup& env, const std::string& name, int min, int& out, Problems& problems,
              bool required) {
  auto v = env(name);
  if (!v) {
    if (required) problems.add(name + " is not set");
    return;
  }
  char* end = nullptr;
  long value = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || value < min || value > (1L << 30)) {
    problems.add(name + "='" + *v + "' is not " +
                 (min > 0 ? "a positive integer" : "a non-negative integer"));
    return;
  }
  out = static_cast<int>(value);
}

// First host of a Slurm node list: "node[01-04,07],gpu5" -> "node01".
std::string first_slurm_host(const std::string& list) {
  auto bracket = list.find('[');
  auto comma = list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return list.substr(0, comma);
  std::string prefix = list.substr(0, bracket);
  std::string inside = list.substr(bracket + 1);
  auto end = inside.find_first_of("-,]");
  return prefix + inside.substr(0, end);
}

// The family of variables that says where this process sits: torchrun's (RANK, ...), else Slurm's,
// else Open MPI's.
struct RankVars {
  std::string rank, size, local, local_size, source;
};

RankVars rank_vars(const EnvLookup& env) {
  const bool slurm =
      !env("RANK") && !env("WORLD_SIZE") && env("SLURM_PROCID") && env("SLURM_NTASKS");
  const bool ompi = !env("RANK") && !env("WORLD_SIZE") && !slurm && env("OMPI_COMM_WORLD_RANK");
  if (slurm)
    return {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "Slurm"};
  if (ompi)
    return {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"};
  return {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK/WORLD_SIZE"};
}

// Fills rank / world size / local values from whichever family of variables is present.
void read_ranks(const InitOptions& options, const EnvLookup& env, EnvRendezvous& out,
                Problems& problems) {
  const RankVars vars = rank_vars(env);
  out.source = vars.source;
  if (options.rank >= 0)
    out.rank = options.rank;
  else
    read_int(env, vars.rank, 0, out.rank, problems, true);
  if (options.world_size >= 0)
    out.world_size = options.world_size;
  else
    read_int(env, vars.size, 1, out.world_size, problems, true);
  if (options.rank >= 0 && options.world_size >= 0) out.source = "options";
  read_int(env, vars.local, 0, out.local_rank, problems, false);
  read_int(env, vars.local_size, 1, out.local_world_size, problems, false);
  if (out.world_size == 0) problems.add("the world size must be at least 1");
  if (out.rank >= 0 && out.world_size > 0 && out.rank >= out.world_size)
    problems.add(vars.rank + "=" + std::to_string(out.rank) + " is not below " + vars.size + "=" +
                 std::to_string(out.world_size) + " (ranks are 0.." +
                 std::to_string(out.world_size - 1) + ")");
  if (out.local_rank >= 0 && out.local_world_size > 0 && out.local_rank >= out.local_world_size)
    problems.add(vars.local + "=" + std::to_string(out.local_rank) + " is not below " +
                 vars.local_size + "=" + std::to_string(out.local_world_size));
}

// Under `lockstep run`, the launcher's store: LOCKSTEP_STORE_ADDR and LOCKSTEP_STORE_PORT.
// (MASTER_ADDR/MASTER_PORT then name a free port for a script's own store, e.g. torch's.)
bool read_launcher_store(const EnvLookup& env, EnvRendezvous& out, Problems& problems) {
  auto addr = env("LOCKSTEP_STORE_ADDR");
  auto port_text = env("LOCKSTEP_STORE_PORT");
  if (!addr && !port_text) return false;
  if (!addr || addr->empty())
    problems.add("LOCKSTEP_STORE_PORT is set but LOCKSTEP_STORE_ADDR is not");
  else
    out.master_addr = *addr;
  int port = -1;
  read_int(env, "LOCKSTEP_STORE_PORT", 1, port, problems, true);
  if (port > 65535)
    problems.add("LOCKSTEP_STORE_PORT=" + std::to_string(port) + " is above 65535");
  else
    out.master_port = port;
  out.launcher_store = true;
  return true;
}

void read_master(const EnvLookup& env, EnvRendezvous& out, Problems& problems) {
  if (read_launcher_store(env, out, problems)) return;
  if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
    out.master_addr = *addr;
  } else if (auto nodes =
                 env("SLURM_JOB_NODELIST") ? env("SLURM_JOB_NODELIST") : env("SLURM_NODELIST")) {
    out.master_addr = first_slurm_host(*nodes);
    out.derived = "address " + out.master_addr + ": the first host of " +
                  (env("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST=" : "SLURM_NODELIST=") + *nodes;
  } else if (out.source == "Open MPI" && mpi::open_bootstrap_store) {
    // mpirun without MASTER_ADDR, in a program that links the mpi backend: rank 0 hosts the store
    // and tells the others its address over MPI (src/backends/mpi/backend.h, [MPI bootstrap]);
    // MASTER_PORT is optional.
    out.master_port = 0;
    if (env("MASTER_PORT")) read_int(env, "MASTER_PORT", 0, out.master_port, problems, true);
    return;
  } else {
    problems.add("MASTER_ADDR is not set (the host name or address of rank 0's machine)");
  }
  int port = -1;
  auto job_id = env("SLURM_JOB_ID");
  if (!env("MASTER_PORT") && out.source == "Slurm" && job_id) {
    char* end = nullptr;
    const unsigned long long id = std::strtoull(job_id->c_str(), &end, 10);
    if (job_id->empty() || *end != '\0') {
      problems.add("MASTER_PORT is not set, and SLURM_JOB_ID='" + *job_id +
                   "' is not a number to derive it from");
    } else {
      out.master_port = slurm_port(id);
      out.derived += (out.derived.empty() ? "" : "; ") +
                     detail::concat("port ", out.master_port, ": from SLURM_JOB_ID=", id);
    }
    return;
  }
  read_int(env, "MASTER_PORT", 0, port, problems, true);
  if (port > 65535)
    problems.add("MASTER_PORT=" + std::to_string(port) + " is above 65535");
  else
    out.master_port = port;
}

}  // namespace

int slurm_port(unsigned long long job_id) {
  return 15000 + static_cast<int>(job_id % 10000);
}

namespace {

// "tcp://host:port" -> host, port.
void parse_tcp_url(const std::string& url, EnvRendezvous& out, Problems& problems) {
  std::string rest = url.substr(6);
  auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    problems.add("init_method '" + url + "' must look like tcp://HOST:PORT");
    return;
  }
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  out.master_addr = host;
  char* end = nullptr;
  std::string port_text = rest.substr(colon + 1);
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port < 0 || port > 65535)
    problems.add("init_method '" + url + "': port '" + port_text + "' is not 0..65535");
  else
    out.master_port = static_cast<int>(port);
}

}  // namespace

int local_world_size_from(const EnvLookup& env) {
  Problems ignored;
  int n = -1;
  read_int(env, rank_vars(env).local_size, 1, n, ignored, false);
  return ignored.empty() ? n : -1;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

EnvRendezvous read_rendezvous(const InitOptions& options, const EnvLookup& env) {
  EnvRendezvous out;
  Problems problems;
  const std::string& method = options.init_method;
  read_ranks(options, env, out, problems);
  if (options.store) {
    // An explicit store: nothing else to read.
  } else if (method == "env://" || method.empty()) {
    read_master(env, out, problems);
  } else if (method.rfind("tcp://", 0) == 0) {
    parse_tcp_url(method, out, problems);
  } else if (method.rfind("file://", 0) == 0) {
    if (method.size() <= 7)
      problems.add("init_method 'file://' needs a path: file:///shared/dir/store");
  } else {
    problems.add("init_method '" + method + "' is not env://, tcp://HOST:PORT or file:///PATH");
  }
  if (!problems.empty()) problems.raise(options.store ? "store" : method);
  return out;
}

}  // namespace lockstep
