// lockstep doctor: devices and libraries: the NVIDIA GPUs this process can see (device files and
// CUDA_VISIBLE_DEVICES), this build's backends, and whether NCCL and MPI can be loaded.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/doctor_checks.h"
#include "group/backend_registry.h"
#include "lockstep/core/error.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;

// Indices N of /dev/nvidiaN.
std::vector<int> gpu_device_files() {
  std::vector<int> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      found.push_back(std::stoi(name.substr(6)));
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Checks CUDA_VISIBLE_DEVICES against the device files; returns the number of visible GPUs.
int check_visible_devices(const char* visible, int present, Report& report) {
  const std::vector<std::string> ids = split(visible, ',');
  if (ids.empty() || ids[0] == "-1" || ids[0] == "NoDevFiles") {
    report.note("gpus", concat("CUDA_VISIBLE_DEVICES='", visible, "' hides all ", present,
                               " GPUs from this process"));
    return 0;
  }
  std::set<std::string> seen;
  for (const std::string& id : ids) {
    if (!seen.insert(id).second) {
      report.problem("gpus", concat("CUDA_VISIBLE_DEVICES='", visible, "' names ", id, " twice"),
                     "list each GPU once");
      return present;
    }
    if (all_digits(id) && std::stoi(id) >= present) {
      report.problem("gpus",
                     concat("CUDA_VISIBLE_DEVICES='", visible, "' names GPU ", id,
                            ", but this host has ", present, " (/dev/nvidia0..", present - 1, ")"),
                     concat("use indices 0..", present - 1, ", or unset CUDA_VISIBLE_DEVICES"));
      return present;
    }
  }
  return static_cast<int>(ids.size());
}

// dlopen's first success among `names`, or "".
std::string loadable(std::initializer_list<const char*> names, void** handle) {
  for (const char* name : names) {
    if (void* h = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      *handle = h;
      return name;
    }
  }
  return "";
}

std::string nccl_text(bool have_gpus) {
  void* h = nullptr;
  const std::string name = loadable({"libnccl.so.2", "libnccl.so"}, &h);
  if (name.empty())
    return have_gpus ? "NCCL: not found (libnccl2; PyTorch and GPU backends need it)"
                     : "NCCL: not installed (only GPU jobs need it)";
  std::string text = "NCCL: " + name;
  using GetVersion = int (*)(int*);
  if (auto get = reinterpret_cast<GetVersion>(::dlsym(h, "ncclGetVersion"))) {
    int v = 0;
    if (get(&v) == 0)
      text += concat(" (version ", v / 10000, ".", v / 100 % 100, ".", v % 100, ")");
  }
  ::dlclose(h);
  return text;
}

std::string mpi_text() {
  void* h = nullptr;
  const std::string name = loadable({"libmpi.so.40", "libmpi.so.12", "libmpi.so"}, &h);
  if (name.empty()) return "MPI: not installed (only mpirun launches need it)";
  ::dlclose(h);
  return "MPI: " + name;
}

}  // namespace

void check_gpus(const Job& job, Report& report) {
  const std::vector<int> files = gpu_device_files();
  const int present = files.empty() ? 0 : files.back() + 1;
  if (files.empty()) {
    report.ok("gpus",
              "no NVIDIA GPU on this host (/dev/nvidia*): the job runs on the CPU "
              "backends");
    return;
  }
  int visible = present;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"))
    visible = check_visible_devices(v, present, report);
  if (visible == 0) return;
  const int local = job.local_processes;
  const std::string seen = concat(visible, visible == 1 ? " GPU" : " GPUs", " visible (",
                                  files.size(), " on this host)");
  if (local > visible)
    report.note("gpus",
                concat(seen, " for ", local,
                       " local ranks: some ranks would share a GPU, "
                       "which NCCL rejects (\"Duplicate GPU detected\")"),
                "start at most one rank per GPU (lockstep run --nproc-per-node <GPUs>)");
  else if (job.valid && job.rendezvous.local_rank >= 0)
    report.ok("gpus", concat(seen, "; this rank should use cuda:", job.rendezvous.local_rank,
                             " (its LOCAL_RANK)"));
  else
    report.ok("gpus", seen + "; each rank should use cuda:LOCAL_RANK");
}

void check_libraries(Report& report) {
  std::string backends;
  bool nccl_backend = false;
  for (const std::string& b : all_backend_names()) {
    backends += (backends.empty() ? "" : ", ") + b;
    nccl_backend = nccl_backend || b == "nccl";
  }
  const bool have_gpus = !gpu_device_files().empty();
  const std::string nccl = nccl_text(have_gpus);
  const std::string text =
      concat("this build has the backends ", backends, "; ", nccl, "; ", mpi_text());
  if (nccl_backend && have_gpus && nccl.find("not found") != std::string::npos)
    report.problem("backends", text, "install NCCL (Debian: libnccl2) for the nccl backend");
  else
    report.ok("backends", text);
}

}  // namespace lockstep::cli::doctor
