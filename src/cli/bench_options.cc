// Command line of `lockstep bench`: the options are declared to CLI11, and the one declaration
// drives both the parser and --help. What a value means is in bench_option_values.h.
#include "cli/bench_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <limits>
#include <memory>

#include "cli/bench_option_values.h"
#include "launcher/help_formatter.h"

namespace lockstep::cli::bench {
namespace {

using detail::concat;

// Every timed row moves about this much data, capped to [kMinIters, kMaxIters] iterations.
constexpr size_t kBytesPerRow = 256 * kMiB;
constexpr int kMinIters = 5;
constexpr int kMaxIters = 200;

constexpr const char* kDescription =
    "usage: lockstep bench [options]\n"
    "\n"
    "Times a collective over a range of message sizes and prints an nccl-tests style table:\n"
    "median time, algbw = size / time, busbw = algbw x the op's factor (all_reduce 2(n-1)/n;\n"
    "all_gather, reduce_scatter, all_to_all, gather, scatter (n-1)/n; broadcast, reduce,\n"
    "sendrecv 1; pingpong 2, since its time is a round trip), busbw as a share of one core's\n"
    "memcpy bandwidth, and a correctness check.\n"
    "\n"
    "Start N local ranks:  lockstep bench --nranks 2 --op all_reduce\n"
    "As one rank of a job: run 'lockstep bench' under 'lockstep run', srun or mpirun; it joins\n"
    "                      through env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)\n";

constexpr const char* kFooter =
    "Sizes follow nccl-tests: for all_gather, reduce_scatter, all_to_all, gather and scatter\n"
    "the size is the whole buffer of n slots, one per rank (rounded to a multiple of n).\n"
    "Exit codes: 0 ok, 1 a failure or a WRONG result, 2 a bad command line.\n";

// An option with a value: apply converts the text (throwing UsageError) and stores it. It runs
// as the option is read, so that the first bad value on the command line is the one reported.
void value(CLI::App& app, std::string name, std::string value_name, std::string help,
           std::function<void(const std::string&)> apply) {
  app.add_option_function<std::string>(std::move(name), std::move(apply), std::move(help))
      ->type_name(std::move(value_name))
      ->trigger_on_parse();
}

// A flag, which runs set when given. CLI11 would take "--flag=VALUE" as a value; a flag takes
// none.
void flag(CLI::App& app, std::string names, std::string help, std::function<void()> set) {
  CLI::Option* option = app.add_flag_callback(std::move(names), std::move(set), std::move(help));
  option
      ->check([name = option->get_name()](const std::string& given) {
        if (given != "true") throw UsageError(concat(name, ": takes no value"));
        return std::string();
      })
      ->trigger_on_parse();
}

// The parser of `lockstep bench`, storing into o; all_ops: whether --op was "all".
std::unique_ptr<CLI::App> bench_app(BenchOptions& o, bool& all_ops) {
  constexpr int kIntMax = std::numeric_limits<int>::max();
  auto app = std::make_unique<CLI::App>(kDescription, "lockstep bench");
  app->set_help_flag();  // --help is declared with the others, and listed last
  app->allow_extras();   // reported as unknown options after parsing
  app->footer(kFooter);
  app->formatter(std::make_shared<launcher::HelpFormatter>(21, true));
  value(*app, "--op", "LIST",
        concat("collectives, comma separated: ", op_names(), "\n(default all_reduce)"),
        [&o, &all_ops](const std::string& v) {
          o.ops = parse_ops(v);
          all_ops = v == "all";
        });
  value(*app, "--backend", "LIST",
        "auto (default: the best for where the ranks are), tcp, shm, hier\n"
        "(shm within each host, tcp between hosts) or mpi (under mpirun);\n"
        "several, comma separated (shm,tcp,mpi), time each row on every one\n"
        "and print them side by side",
        [&o](const std::string& v) { o.backend = v; });
  value(*app, "--dtype", "NAME", "f32 (default), f64, f16, bf16, i8, u8, i32, i64, bool",
        [&o](const std::string& v) {
          try {
            o.dtype = parse_dtype(v);
          } catch (const InvalidArgument& e) {
            throw UsageError(concat("--dtype: ", e.what()));
          }
        });
  value(*app, "--reduce-op", "NAME", "sum (default), avg, prod, min, max, band, bor, bxor",
        [&o](const std::string& v) {
          try {
            o.reduce_op = parse_reduce_op(v);
          } catch (const InvalidArgument& e) {
            throw UsageError(concat("--reduce-op: ", e.what()));
          }
        });
  value(*app, "--root", "R", "root of broadcast, reduce, gather and scatter (default 0)",
        [&o](const std::string& v) { o.root = parse_int("--root", v, 0, kIntMax); });
  value(*app, "--min-bytes", "N", "smallest message (default 4); suffixes K, M, G",
        [&o](const std::string& v) { o.min_bytes = parse_bytes("--min-bytes", v); });
  value(*app, "--max-bytes", "N", "largest message (default 64M)",
        [&o](const std::string& v) { o.max_bytes = parse_bytes("--max-bytes", v); });
  value(*app, "--step-factor", "F", "multiply the size by F per row (default 2)",
        [&o](const std::string& v) { o.step_factor = parse_int("--step-factor", v, 2, 1024); });
  value(*app, "--iters", "N",
        concat("timed iterations per row (default: by size, ", kMinIters, " to ", kMaxIters, ")"),
        [&o](const std::string& v) { o.iters = parse_int("--iters", v, 1, kIntMax); });
  value(*app, "--warmup", "N", "untimed iterations per row (default: iters / 10, at least 1)",
        [&o](const std::string& v) { o.warmup = parse_int("--warmup", v, 0, kIntMax); });
  value(*app, "--buffers", "KIND",
        "private (default: plain memory of each rank) or shared (from\n"
        "ProcessGroup::allocate: on shm, collectives skip the copies)",
        [&o](const std::string& v) {
          if (v != "shared" && v != "private")
            throw UsageError(concat("--buffers '", v, "': use private or shared"));
          o.shared_buffers = v == "shared";
        });
  flag(*app, "--check", "verify every row against its closed form (default)",
       [&o] { o.check = true; });
  flag(*app, "--no-check", "skip the verification", [&o] { o.check = false; });
  value(*app, "--nranks", "N", "start N local ranks (MASTER_ADDR=127.0.0.1) and wait for them",
        [&o](const std::string& v) { o.nranks = parse_int("--nranks", v, 1, 1024); });
  value(*app, "--master-port", "P", "port of the local ranks' store (default: a free one)",
        [&o](const std::string& v) { o.master_port = parse_int("--master-port", v, 0, 65535); });
  flag(*app, "-h,--help", "this text", [&o] { o.help = true; });
  return app;
}

// Cross-option checks, once every option is known.
void validate(const BenchOptions& o) {
  if (o.min_bytes == 0) throw UsageError("--min-bytes: must be at least 1");
  if (o.min_bytes > o.max_bytes)
    throw UsageError(
        concat("--min-bytes ", o.min_bytes, " is larger than --max-bytes ", o.max_bytes));
  if (o.backend.empty() || o.backend.front() == ',' || o.backend.back() == ',' ||
      o.backend.find(",,") != std::string::npos)
    throw UsageError(concat("--backend '", o.backend,
                            "': empty name; use auto, tcp, shm or mpi, or a list like shm,tcp"));
  if (o.nranks > 0 && ("," + o.backend + ",").find(",mpi,") != std::string::npos)
    throw UsageError(concat("--backend ", o.backend,
                            ": mpi needs ranks started by mpirun, not "
                            "--nranks; run: mpirun -np ",
                            o.nranks, " lockstep bench --backend ", o.backend,
                            " (as root add --allow-run-as-root; on few cores add "
                            "--oversubscribe)"));
  for (BenchOp op : o.ops) {
    if (bench_op_reduces(op) && !reduce_op_supports(o.reduce_op, o.dtype))
      throw UsageError(concat("--reduce-op ", reduce_op_name(o.reduce_op),
                              " cannot reduce --dtype ", dtype_name(o.dtype), " (needed by --op ",
                              bench_op_name(op),
                              "); bitwise ops need an integer dtype and bool cannot be reduced"));
  }
}

}  // namespace

std::string_view bench_op_name(BenchOp op) {
  switch (op) {
    case BenchOp::all_reduce:
      return "all_reduce";
    case BenchOp::broadcast:
      return "broadcast";
    case BenchOp::reduce:
      return "reduce";
    case BenchOp::all_gather:
      return "all_gather";
    case BenchOp::reduce_scatter:
      return "reduce_scatter";
    case BenchOp::all_to_all:
      return "all_to_all";
    case BenchOp::gather:
      return "gather";
    case BenchOp::scatter:
      return "scatter";
    case BenchOp::sendrecv:
      return "sendrecv";
    case BenchOp::pingpong:
      return "pingpong";
  }
  return "unknown-op";
}

bool bench_op_reduces(BenchOp op) {
  return op == BenchOp::all_reduce || op == BenchOp::reduce || op == BenchOp::reduce_scatter;
}

bool bench_op_rooted(BenchOp op) {
  return op == BenchOp::broadcast || op == BenchOp::reduce || op == BenchOp::gather ||
         op == BenchOp::scatter;
}

BenchOptions parse_bench_options(int argc, char** argv) {
  BenchOptions o;
  bool all_ops = false;
  auto app = bench_app(o, all_ops);
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  try {
    app->parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::ArgumentMismatch&) {
    // CLI11 ran out of arguments for an option's value, so that option is the last argument.
    throw UsageError(concat(args.back().substr(0, args.back().find('=')), ": missing value"));
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  if (std::vector<std::string> extra = app->remaining(); !extra.empty())
    throw UsageError(
        concat("unknown option \"", extra.front().substr(0, extra.front().find('=')), "\""));
  if (o.help) return o;
  // "all" keeps only the collectives that apply to the dtype (bool cannot be reduced).
  if (all_ops)
    std::erase_if(o.ops, [&](BenchOp op) {
      return bench_op_reduces(op) && !reduce_op_supports(o.reduce_op, o.dtype);
    });
  validate(o);
  return o;
}

std::string bench_usage() {
  BenchOptions options;
  bool all_ops = false;
  return bench_app(options, all_ops)->help();
}

std::vector<std::string> rank_arguments(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string_view arg = argv[i];
    bool ours = arg.starts_with("--nranks") || arg.starts_with("--master-port");
    if (!ours) {
      out.emplace_back(arg);
      continue;
    }
    if (arg.find('=') == std::string_view::npos) ++i;  // skip the separate value
  }
  return out;
}

int iterations_for(const BenchOptions& options, size_t bytes) {
  if (options.iters > 0) return options.iters;
  size_t by_volume = kBytesPerRow / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(by_volume, kMinIters, kMaxIters));
}

int warmup_for(const BenchOptions& options, size_t bytes) {
  if (options.warmup >= 0) return options.warmup;
  return std::max(1, iterations_for(options, bytes) / 10);
}

int runs_per_iteration(BenchOp op, size_t bytes) {
  if (op != BenchOp::pingpong) return 1;
  return static_cast<int>(
      std::clamp<size_t>((size_t{1} << 20) / std::max<size_t>(bytes, 1), 1, 100));
}

std::vector<size_t> message_sizes(const BenchOptions& options) {
  std::vector<size_t> sizes;
  for (size_t s = options.min_bytes; s <= options.max_bytes;) {
    sizes.push_back(s);
    if (s > options.max_bytes / options.step_factor) break;
    s *= options.step_factor;
  }
  return sizes;
}

}  // namespace lockstep::cli::bench
