// multihost_job: the programs the multi-host tests run on network-namespace hosts, one rank each
// (under `lockstep run`, which gives the environment).
//
//   multihost_job loop SECONDS [FLOATS]  all_reduces of FLOATS (default 1024) floats on tcp for
//       about SECONDS: rank 0's clock decides when to stop, and every 20 ops its verdict rides in
//       the last element, so every rank stops after the same op. Each result is checked against
//       its closed form. Prints "loop: started (rank R, pid P)" after the first op and "loop: ok
//       <n> all_reduces on <size> ranks" at the end (partition.sh cuts a link or stops a rank in
//       between).
//   multihost_job order-mismatch RANKS   on auto: the ranks in RANKS (comma separated) call
//       broadcast, then all_reduce; every other rank the reverse.
//   multihost_job size-mismatch RANKS    on auto: the ranks in RANKS pass 1000 floats to an
//       all_reduce, the others 1024.
// The mismatch modes print "mismatch: <error type> after <seconds> s on <backend>: <message>" on
// each rank and exit 0 (a launcher would stop the other ranks of a node whose rank exits
// non-zero, before they print theirs), or "mismatch: none" and exit 3 when no error came.
// An error is printed as "multihost_job: error at <unix time>: <message>".
// Exit codes: 0 ok, 1 a wrong element, 2 an error or bad usage, 3 no mismatch found.
#include <lockstep/core/error.h>
#include <lockstep/group/init.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int loop_on(lockstep::ProcessGroup& pg, double seconds, size_t floats) {
  const int n = pg.size();
  const auto start = Clock::now();
  std::vector<float> x(std::max<size_t>(floats, 2));
  long long ops = 0;
  for (bool more = true; more; ++ops) {
    const bool vote = ops % 20 == 19;  // this op carries rank 0's verdict
    for (size_t i = 0; i + 1 < x.size(); ++i) x[i] = static_cast<float>(pg.rank() + i % 5);
    x.back() = pg.rank() == 0 && vote && since(start) >= seconds ? 1.0f : 0.0f;
    pg.all_reduce(lockstep::view(x))->wait();
    for (size_t i = 0; i + 1 < x.size(); ++i)
      if (x[i] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 5))) {
        std::fprintf(stderr, "loop: wrong element %zu after %lld ops: %g\n", i, ops, x[i]);
        return 1;
      }
    if (ops == 0) {
      std::printf("loop: started (rank %d, pid %d)\n", pg.rank(), static_cast<int>(::getpid()));
      std::fflush(stdout);
    }
    more = x.back() == 0.0f;
  }
  std::printf("loop: ok %lld all_reduces on %d ranks\n", ops, n);
  return 0;
}

// "multihost_job: error at <unix time>: <message>" (the wall clock, so that a test can tell when
// the error came: before the group's destruction).
int report(const lockstep::Error& e) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  std::fprintf(stderr, "multihost_job: error at %.3f: %s\n",
               std::chrono::duration<double>(now).count(), e.what());
  return 2;
}

int loop(double seconds, size_t floats) {
  auto pg = lockstep::init_process_group({.backend = "tcp"});
  try {
    return loop_on(*pg, seconds, floats);
  } catch (const lockstep::Error& e) {
    return report(e);
  }
}

const char* type_of(const lockstep::Error& e) {
  if (dynamic_cast<const lockstep::MismatchError*>(&e)) return "MismatchError";
  if (dynamic_cast<const lockstep::TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const lockstep::NetworkError*>(&e)) return "NetworkError";
  return "Error";
}

// Runs body on a fresh auto group; reports the error it raised.
int mismatch(const std::function<void(lockstep::ProcessGroup&)>& body) {
  auto pg = lockstep::init_process_group({});
  auto start = Clock::now();
  try {
    // Everyone is in, so the time counts the mismatch only. A rank may still be finishing this
    // barrier (its last message read ahead) when a faster one fails the op and aborts the group:
    // it learns the mismatch here, at the end of the barrier, and that is as good.
    pg->barrier()->wait();
    start = Clock::now();
    body(*pg);
  } catch (const lockstep::Error& e) {
    std::printf("mismatch: %s after %.2f s on %s: %s\n", type_of(e), since(start),
                pg->backend_name().c_str(), e.what());
    return 0;  // the error the test wants (its type is checked there): no rank stops the others
  }
  std::printf("mismatch: none\n");
  return 3;
}

// "4,5" -> whether rank is in it.
bool listed(const std::string& ranks, int rank) {
  size_t at = 0;
  while (at <= ranks.size()) {
    size_t end = std::min(ranks.find(',', at), ranks.size());
    if (ranks.substr(at, end - at) == std::to_string(rank)) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "loop" && (argc == 3 || argc == 4))
      return loop(std::atof(argv[2]), argc == 4 ? std::strtoul(argv[3], nullptr, 10) : 1024);
    const std::string ranks = argc == 3 ? argv[2] : "";
    if (mode == "order-mismatch" && argc == 3)
      return mismatch([&](lockstep::ProcessGroup& pg) {
        std::vector<float> x(1024, 1.0f);
        if (listed(ranks, pg.rank())) {
          pg.broadcast(lockstep::view(x), {.root = 0})->wait();
          pg.all_reduce(lockstep::view(x))->wait();
        } else {
          pg.all_reduce(lockstep::view(x))->wait();
          pg.broadcast(lockstep::view(x), {.root = 0})->wait();
        }
      });
    if (mode == "size-mismatch" && argc == 3)
      return mismatch([&](lockstep::ProcessGroup& pg) {
        std::vector<float> x(listed(ranks, pg.rank()) ? 1000 : 1024, 1.0f);
        pg.all_reduce(lockstep::view(x))->wait();
      });
  } catch (const lockstep::Error& e) {
    return report(e);
  }
  std::fprintf(stderr,
               "usage: multihost_job loop SECONDS [FLOATS] | order-mismatch RANKS | "
               "size-mismatch RANKS\n");
  return 2;
}
