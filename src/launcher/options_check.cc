// check_launch_options: the checks that need more than one option, or the filesystem.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "launcher/options.h"
#include "lockstep/core/settings.h"
#include "net/auth.h"

namespace lockstep::launcher {
namespace {

enum class FileKind { missing, directory, not_executable, executable };

FileKind classify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileKind::missing;
  if (S_ISDIR(st.st_mode)) return FileKind::directory;
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return FileKind::not_executable;
  return FileKind::executable;
}

void require_executable(const std::string& path, const std::string& shown) {
  switch (classify(path)) {
    case FileKind::missing:
      throw UsageError(detail::concat("program '", shown, "' does not exist (",
                                      std::strerror(ENOENT), "); check the path"));
    case FileKind::directory:
      throw UsageError(detail::concat("program '", shown, "' is a directory, not a program"));
    case FileKind::not_executable:
      throw UsageError(detail::concat("program '", shown,
                                      "' is not executable; make it so with: chmod +x ", shown));
    case FileKind::executable:
      return;
  }
}

// Finds name in PATH, as execvp would. Throws UsageError when it is not there.
std::string search_path(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::string path_list = env ? env : "/usr/local/bin:/usr/bin:/bin";
  std::string non_executable;
  size_t start = 0;
  while (start <= path_list.size()) {
    size_t colon = path_list.find(':', start);
    if (colon == std::string::npos) colon = path_list.size();
    std::string dir = path_list.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    FileKind kind = classify(candidate);
    if (kind == FileKind::executable) return candidate;
    if (kind == FileKind::not_executable && non_executable.empty()) non_executable = candidate;
    start = colon + 1;
  }
  if (!non_executable.empty()) require_executable(non_executable, non_executable);
  throw UsageError(detail::concat("program '", name, "' was not found in PATH (", path_list,
                                  "); give its full path or fix PATH"));
}

// PROGRAM as execve needs it: a path with a '/' as given, a bare name through PATH.
std::string resolve_executable(const std::string& name) {
  if (name.find('/') == std::string::npos) return search_path(name);
  require_executable(name, name);
  return name;
}

bool is_python_script(const std::string& name) {
  return name.size() > 3 && name.ends_with(".py");
}

// The interpreter for a script or a module: --python, $LOCKSTEP_PYTHON, or python3 in PATH.
std::string find_python(const LaunchOptions& o, const std::string& what) {
  std::string chosen =
      !o.python.empty() ? o.python : live_setting(LiveSetting::python).value_or("");
  std::string source = !o.python.empty() ? "--python" : "LOCKSTEP_PYTHON";
  try {
    return resolve_executable(chosen.empty() ? "python3" : chosen);
  } catch (const UsageError& e) {
    if (chosen.empty())
      throw UsageError(detail::concat(
          what,
          " needs a Python interpreter, but python3 is not in PATH; name the one that has "
          "torch with --python PATH or LOCKSTEP_PYTHON (the scripts' is .venv/bin/python)"));
    throw UsageError(detail::concat(what, " needs a Python interpreter, but ", source, "='", chosen,
                                    "' is not one: ", e.what()));
  }
}

void check_script(const std::string& script) {
  struct stat st {};
  if (::stat(script.c_str(), &st) != 0)
    throw UsageError(detail::concat("script '", script, "' does not exist (", std::strerror(errno),
                                    "); check the path"));
  if (!S_ISREG(st.st_mode))
    throw UsageError(detail::concat("script '", script, "' is not a regular file"));
  if (::access(script.c_str(), R_OK) != 0)
    throw UsageError(
        detail::concat("script '", script, "' is not readable (", std::strerror(errno), ")"));
}

void check_program(LaunchOptions& o) {
  if (o.module && o.no_python)
    throw UsageError(
        "-m runs a module with the Python interpreter, --no-python runs a program "
        "as given: choose one");
  if (o.program.empty()) {
    if (o.module)
      throw UsageError(
          "-m needs a module name: lockstep run [options] -m package.module [ARGS...]");
    throw UsageError(
        "no program given; usage: lockstep run [options] [--] PROGRAM [ARGS...] "
        "(see 'lockstep run --help')");
  }
  const std::string& name = o.program.front();
  if (o.module) {
    if (name.empty() || name.front() == '-')
      throw UsageError(detail::concat("-m needs a module name, got '", name,
                                      "': lockstep run [options] -m package.module [ARGS...]"));
    o.program_path = find_python(o, "-m " + name);
    o.command = {o.program_path, "-u", "-m"};
  } else if (!o.no_python && is_python_script(name)) {
    check_script(name);
    o.program_path = find_python(o, "script '" + name + "'");
    o.command = {o.program_path, "-u"};
  } else {
    o.program_path = resolve_executable(name);
    o.command.clear();
  }
  o.command.insert(o.command.end(), o.program.begin(), o.program.end());
}

void check_local_rank(const char* option, int local_rank, int nproc) {
  if (local_rank >= nproc)
    throw UsageError(detail::concat("--", option, " names local rank ", local_rank,
                                    ", but --nproc-per-node is ", nproc, " (local ranks 0..",
                                    nproc - 1, ")"));
}

void check_topology(LaunchOptions& o) {
  if (o.elastic) {
    // Node ranks come from the rendezvous (as under torchrun); --node-rank is accepted, unused.
    if (o.standalone)
      throw UsageError(
          detail::concat("--standalone runs one node, but --nnodes is the elastic "
                         "range ",
                         o.nnodes_min, ":", o.nnodes_max));
    if (o.master_port == 0)
      throw UsageError(
          "--master-port 0 picks a port that the other nodes of an elastic job "
          "cannot know; give every node the same fixed --master-port");
    if (o.master_addr.empty())
      throw UsageError(
          "--master-addr is empty; give the address of the host whose launcher "
          "hosts the store");
    return;
  }
  if (o.node_rank >= o.nnodes)
    throw UsageError(detail::concat("--node-rank ", o.node_rank, " is out of range for --nnodes ",
                                    o.nnodes, ": node ranks are 0..", o.nnodes - 1));
  if (o.standalone) {
    if (o.nnodes != 1)
      throw UsageError(detail::concat("--standalone runs one node, but --nnodes is ", o.nnodes));
    o.master_addr = "127.0.0.1";
    o.master_port = 0;
  }
  if (o.nnodes > 1 && o.master_port == 0)
    throw UsageError(detail::concat("--master-port 0 picks a port that the other ", o.nnodes - 1,
                                    " node(s) cannot know; give every node the same fixed "
                                    "--master-port"));
  if (o.master_addr.empty()) throw UsageError("--master-addr is empty; give node 0's address");
}

// The job's secret (see LaunchOptions::secret).
std::string job_secret(const LaunchOptions& o) {
  try {
    if (!o.secret_file.empty()) return auth::read_secret_file(o.secret_file);
    if (std::string s = auth::secret_from_environment(); !s.empty()) return s;
  } catch (const ConfigError& e) {
    throw UsageError(e.what());
  }
  return o.nnodes == 1 && !o.elastic ? auth::make_secret() : "";
}

}  // namespace

void check_launch_options(LaunchOptions& o) {
  check_topology(o);
  o.secret = job_secret(o);
  for (int r : o.local_ranks_filter) check_local_rank("local-ranks-filter", r, o.nproc_per_node);
  for (const auto& [r, s] : o.tee.per_local_rank) check_local_rank("tee", r, o.nproc_per_node);
  for (const auto& [r, s] : o.redirects.per_local_rank)
    check_local_rank("redirects", r, o.nproc_per_node);
  check_program(o);
}

}  // namespace lockstep::launcher
