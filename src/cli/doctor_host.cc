// lockstep doctor: this host's resources: /dev/shm against the shm backend's segment size, cores
// against the local ranks and their OpenMP threads, and the open-file limit against the sockets
// a rank of this world size opens.
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "backends/shm/layout.h"
#include "cli/doctor_checks.h"
#include "core/host_cores.h"
#include "launcher/child_env.h"
#include "launcher/options.h"
#include "lockstep/core/error.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;

constexpr const char* kShmDir = "/dev/shm";
// Below this, NCCL's shared-memory transport and DataLoader workers commonly fail (Docker's
// default /dev/shm is 64 MiB).
constexpr uint64_t kSmallShmBytes = 256ull << 20;
// Descriptors a rank needs besides its connections: libraries, data files, pipes, logs.
constexpr rlim_t kBaseDescriptors = 64;

std::string size_text(uint64_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30))
    std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(1ull << 30));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / double(1ull << 20));
  return text;
}

// OMP_NUM_THREADS's first level ("4" or "4,2"); 0 when unset, -1 when malformed.
int omp_threads() {
  const char* v = std::getenv("OMP_NUM_THREADS");
  if (!v) return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end == v || (*end != '\0' && *end != ',') || n < 1 || n > 1 << 20) return -1;
  return static_cast<int>(n);
}

}  // namespace

void check_shared_memory(const Job& job, Report& report) {
  const int local = job.local_processes;
  const bool needed = local > 1;  // the shm backend serves the ranks that share a host
  const uint64_t need = shm::layout_for(local).total;
  struct statvfs fs {};
  if (::statvfs(kShmDir, &fs) != 0) {
    const std::string text = concat(kShmDir, " is missing: the shm backend cannot run here");
    if (needed)
      report.problem("/dev/shm", text, "mount a tmpfs on /dev/shm, or use the tcp backend");
    else
      report.note("/dev/shm", text);
    return;
  }
  const uint64_t total = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  const std::string found =
      concat(size_text(free), " free of ", size_text(total), "; the shm backend needs ",
             size_text(need), " per group of ", local, local == 1 ? " rank" : " ranks");
  if (::access(kShmDir, W_OK) != 0 && needed) {
    report.problem("/dev/shm", concat(kShmDir, " is not writable (", found, ")"),
                   "make /dev/shm writable for this user (mode 1777), or use the tcp backend");
  } else if (free < need) {
    const std::string fix =
        concat("free space in ", kShmDir,
               " (remove stale lockstep-* files) or "
               "enlarge it (docker run --shm-size=1g; mount -o remount,size=2g ",
               kShmDir, "), or use the tcp backend");
    if (needed)
      report.problem("/dev/shm", found, fix);
    else
      report.note("/dev/shm", found, fix);
  } else if (total < kSmallShmBytes) {
    report.note("/dev/shm",
                found +
                    "; enough for lockstep, but NCCL and data-loader workers often "
                    "need more",
                "docker run --shm-size=1g (or --ipc=host)");
  } else {
    report.ok("/dev/shm", found);
  }
}

void check_cores(const Job& job, Report& report) {
  const int cores = detail::process_cores();
  const int local = job.local_processes;
  const int omp = omp_threads();
  const std::string ranks = concat(local, local == 1 ? " rank" : " ranks", " on this host",
                                   job.valid && job.rendezvous.local_world_size < 0
                                       ? " (LOCAL_WORLD_SIZE not set: assumed 1)"
                                       : "");
  const std::string suggested =
      concat("OMP_NUM_THREADS=", launcher::default_omp_threads(cores, local));
  if (omp < 0) {
    report.problem(
        "cores",
        concat("OMP_NUM_THREADS='", std::getenv("OMP_NUM_THREADS"), "' is not a positive integer"),
        "set " + suggested + " (cores / local ranks), or unset it");
  } else if (omp > 1 && static_cast<long>(omp) * local > cores) {
    report.problem("cores",
                   concat(ranks, " x OMP_NUM_THREADS=", omp, " = ", omp * local, " threads on ",
                          cores, cores == 1 ? " core" : " cores",
                          ": oversubscribed, every rank's compute slows down"),
                   "set " + suggested +
                       " (cores / local ranks); lockstep run does this when "
                       "OMP_NUM_THREADS is unset");
  } else if (local > cores) {
    report.note("cores", concat(ranks, ", ", cores, cores == 1 ? " core" : " cores",
                                ": the ranks take turns (lockstep's waits block instead of "
                                "spinning), so this works but each rank runs slower"));
  } else if (omp == 0 && local > 1) {
    report.note("cores",
                concat(ranks, ", ", cores,
                       " cores; OMP_NUM_THREADS is not set, so each "
                       "rank's OpenMP / LibTorch pool may use every core"),
                "set " + suggested + " (lockstep run sets it when unset)");
  } else {
    report.ok("cores", concat(ranks, ", ", cores, cores == 1 ? " core" : " cores",
                              omp > 0 ? concat(", OMP_NUM_THREADS=", omp) : std::string()));
  }
}

void check_open_files(const Job& job, Report& report) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t world = static_cast<rlim_t>(job.world_size);
  // tcp: one connection per peer, the store connection and a listener; the rank hosting the
  // store also holds one connection per rank; shm: one pidfd per local peer.
  const rlim_t need = kBaseDescriptors + (world - 1) + 2 + (job.hosts_store() ? world : 0) +
                      static_cast<rlim_t>(job.local_processes);
  const std::string hard =
      limit.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(limit.rlim_max);
  const std::string found = concat("limit ", limit.rlim_cur, " (hard ", hard, "); a rank of a ",
                                   job.world_size, "-rank job needs about ", need);
  if (limit.rlim_cur >= need) {
    report.ok("open files", found);
    return;
  }
  const rlim_t target = std::max<rlim_t>(need, 65536);
  if (limit.rlim_max >= target)
    report.problem("open files", found, concat("raise it before starting: ulimit -n ", target));
  else if (limit.rlim_max >= need)
    report.problem("open files", found,
                   concat("raise it before starting: ulimit -n ", limit.rlim_max));
  else
    report.problem("open files", found,
                   concat("the hard limit is too low too: raise nofile to ", target,
                          " in /etc/security/limits.conf, systemd's LimitNOFILE, or docker run "
                          "--ulimit nofile=",
                          target, ":", target));
}

}  // namespace lockstep::cli::doctor
