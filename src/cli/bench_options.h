// Command line of `lockstep bench`: which collectives, which sizes, how many iterations, and
// whether this process starts the ranks itself (--nranks) or is one rank of a launched job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/dtype.h"
#include "lockstep/core/error.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::cli::bench {

// The collectives bench can time. sendrecv: every rank sends to rank+1 and receives from rank-1.
// pingpong: rank 2i sends to rank 2i+1, which sends it back (the time is the round trip; with an
// odd world the last rank sits out).
enum class BenchOp : uint8_t {
  all_reduce,
  broadcast,
  reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  gather,
  scatter,
  sendrecv,
  pingpong
};

inline constexpr BenchOp kAllBenchOps[] = {
    BenchOp::all_reduce,     BenchOp::broadcast,  BenchOp::reduce, BenchOp::all_gather,
    BenchOp::reduce_scatter, BenchOp::all_to_all, BenchOp::gather, BenchOp::scatter,
    BenchOp::sendrecv,       BenchOp::pingpong};

std::string_view bench_op_name(BenchOp op);
// Whether the op combines values with a ReduceOp (all_reduce, reduce, reduce_scatter).
bool bench_op_reduces(BenchOp op);
// Whether the op has a root (broadcast, reduce, gather, scatter).
bool bench_op_rooted(BenchOp op);

// A bad command line. bench_command prints it with a pointer to --help and exits with code 2.
class UsageError : public InvalidArgument {
  using InvalidArgument::InvalidArgument;
};

inline constexpr size_t kMiB = size_t{1} << 20;

struct BenchOptions {
  std::vector<BenchOp> ops = {BenchOp::all_reduce};  // --op, comma separated, or "all"
  std::string backend = "auto";                      // --backend: InitOptions.backend
  DType dtype = DType::f32;                          // --dtype
  ReduceOp reduce_op = ReduceOp::sum;                // --reduce-op
  int root = 0;                  // --root: of broadcast, reduce, gather, scatter
  size_t min_bytes = 4;          // --min-bytes
  size_t max_bytes = 64 * kMiB;  // --max-bytes
  size_t step_factor = 2;        // --step-factor: size *= factor per row
  int iters = 0;                 // --iters: timed iterations; 0: by size
  int warmup = -1;               // --warmup: untimed ones; -1: by size
  bool check = true;             // --check / --no-check
  bool shared_buffers = false;   // --buffers shared: from ProcessGroup::allocate; private: new[]
  int nranks = 0;                // --nranks: start this many local ranks; 0: be one rank (env://)
  int master_port = 0;           // --master-port with --nranks; 0: pick a free port
  bool help = false;             // --help / -h
};

// Parses argv (argv[0] is "bench"). Accepts "--name value" and "--name=value"; sizes take the
// suffixes K, M and G (binary: 64M = 64 MiB). Throws UsageError naming the offending option.
BenchOptions parse_bench_options(int argc, char** argv);

// The text --help prints.
std::string bench_usage();

// argv for each rank started by --nranks: the same options without --nranks and --master-port.
std::vector<std::string> rank_arguments(int argc, char** argv);

// Timed iterations for a row of `bytes`: options.iters, or enough that every size moves about
// the same volume (small sizes get many iterations, 64 MiB a handful).
int iterations_for(const BenchOptions& options, size_t bytes);
int warmup_for(const BenchOptions& options, size_t bytes);
// Back-to-back runs of the op per timed iteration, whose mean is the iteration's time: 1, but a
// pingpong runs up to 100 round trips (fewer for larger messages) as osu_latency does, since a
// barrier before each microsecond-long round trip would add its own release skew to the time.
// bench/mpi_collective_bench.c uses the same rule.
int runs_per_iteration(BenchOp op, size_t bytes);

// Message sizes of the table: min_bytes, min_bytes * step_factor, ... up to max_bytes.
std::vector<size_t> message_sizes(const BenchOptions& options);

}  // namespace lockstep::cli::bench
