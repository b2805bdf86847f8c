#include "cli/bench_options.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

namespace lockstep::cli::bench {
namespace {

using detail::concat;

// Every timed row moves about this much data, capped to [kMinIters, kMaxIters] iterations.
constexpr size_t kBytesPerRow = 256 * kMiB;
constexpr int kMinIters = 5;
constexpr int kMaxIters = 200;

std::string op_names() {
  std::string out;
  for (BenchOp op : kAllBenchOps) out += concat(out.empty() ? "" : ", ", bench_op_name(op));
  return out + ", all";
}

std::vector<BenchOp> parse_ops(std::string_view list) {
  std::vector<BenchOp> ops;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (name == "all") {
      ops.assign(std::begin(kAllBenchOps), std::end(kAllBenchOps));
      continue;
    }
    auto it = std::find_if(std::begin(kAllBenchOps), std::end(kAllBenchOps),
                           [&](BenchOp op) { return bench_op_name(op) == name; });
    if (it == std::end(kAllBenchOps))
      throw UsageError(concat("--op: unknown collective \"", name, "\"; use one of: ", op_names(),
                              " (comma separated)"));
    ops.push_back(*it);
  }
  if (ops.empty()) throw UsageError(concat("--op: empty list; use one of: ", op_names()));
  return ops;
}

// "4096", "64K", "64M", "1G" (binary multiples).
size_t parse_bytes(std::string_view option, std::string_view text) {
  size_t multiplier = 1;
  std::string_view digits = text;
  if (!digits.empty()) {
    char suffix = digits.back();
    if (suffix == 'K' || suffix == 'k') multiplier = size_t{1} << 10;
    if (suffix == 'M' || suffix == 'm') multiplier = size_t{1} << 20;
    if (suffix == 'G' || suffix == 'g') multiplier = size_t{1} << 30;
    if (multiplier != 1) digits.remove_suffix(1);
  }
  size_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      value > std::numeric_limits<size_t>::max() / multiplier)
    throw UsageError(
        concat(option, ": \"", text, "\" is not a byte count; write e.g. 4096, 64K, 64M or 1G"));
  return value * multiplier;
}

int parse_int(std::string_view option, std::string_view text, int min_value, int max_value) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min_value ||
      value > max_value)
    throw UsageError(
        concat(option, ": \"", text, "\" is not an integer in [", min_value, ", ", max_value, "]"));
  return value;
}

// Walks argv, handing out "--name value" and "--name=value" pairs.
class ArgCursor {
 public:
  ArgCursor(int argc, char** argv) : argc_(argc), argv_(argv) {}
  bool next() {
    if (++index_ >= argc_) return false;
    std::string_view arg = argv_[index_];
    size_t eq = arg.find('=');
    name_ = arg.substr(0, eq);
    inline_value_.reset();
    if (arg.starts_with("--") && eq != std::string_view::npos) inline_value_ = arg.substr(eq + 1);
    return true;
  }
  std::string_view name() const { return name_; }
  std::string_view value() {
    if (inline_value_) return *inline_value_;
    if (index_ + 1 >= argc_) throw UsageError(concat(name_, ": missing value"));
    return argv_[++index_];
  }
  bool has_inline_value() const { return inline_value_.has_value(); }

 private:
  int argc_;
  char** argv_;
  int index_ = 0;
  std::string_view name_;
  std::optional<std::string_view> inline_value_;
};

// Applies one option with a value; returns false when the name is not one of them.
bool apply_valued(BenchOptions& o, std::string_view name, ArgCursor& args) {
  constexpr int kIntMax = std::numeric_limits<int>::max();
  if (name == "--backend")
    o.backend = std::string(args.value());
  else if (name == "--min-bytes")
    o.min_bytes = parse_bytes(name, args.value());
  else if (name == "--max-bytes")
    o.max_bytes = parse_bytes(name, args.value());
  else if (name == "--step-factor")
    o.step_factor = parse_int(name, args.value(), 2, 1024);
  else if (name == "--iters")
    o.iters = parse_int(name, args.value(), 1, kIntMax);
  else if (name == "--warmup")
    o.warmup = parse_int(name, args.value(), 0, kIntMax);
  else if (name == "--root")
    o.root = parse_int(name, args.value(), 0, kIntMax);
  else if (name == "--nranks")
    o.nranks = parse_int(name, args.value(), 1, 1024);
  else if (name == "--master-port")
    o.master_port = parse_int(name, args.value(), 0, 65535);
  else if (name == "--buffers") {
    std::string_view kind = args.value();
    if (kind != "shared" && kind != "private")
      throw UsageError(concat("--buffers '", kind, "': use private or shared"));
    o.shared_buffers = kind == "shared";
  }  else if (name == "--dtype" || name == "--reduce-op") {
    std::string_view text = args.value();
    try {
      if (name == "--dtype")
        o.dtype = parse_dtype(text);
      else
        o.reduce_op = parse_reduce_op(text);
    } catch (const InvalidArgument& e) {
      throw UsageError(concat(name, ": ", e.what()));
    }
  } else {
    return false;
  }
  return true;
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
    throw UsageError(concat("--backend ", o.backend, ": mpi needs ranks started by mpirun, not "
                            "--nranks; run: mpirun -np ", o.nranks, " lockstep bench --backend ",
                            o.backend, " (as root add --allow-run-as-root; on few cores add "
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
  ArgCursor args(argc, argv);
  while (args.next()) {
    std::string_view name = args.name();
    if (name == "--help" || name == "-h")
      o.help = true;
    else if (name == "--check" || name == "--no-check") {
      if (args.has_inline_value()) throw UsageError(concat(name, ": takes no value"));
      o.check = name == "--check";
    } else if (name == "--op") {
      std::string_view list = args.value();
      o.ops = parse_ops(list);
      all_ops = list == "all";
    } else if (!apply_valued(o, name, args)) {
      throw UsageError(concat("unknown option \"", name, "\""));
    }
  }
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
  return concat(
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
      "                      through env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)\n"
      "\n"
      "options:\n"
      "  --op LIST          collectives, comma separated: ",
      op_names(),
      "\n"
      "                     (default all_reduce)\n"
      "  --backend LIST     auto (default: the best for where the ranks are), tcp, shm, hier\n"
      "                     (shm within each host, tcp between hosts) or mpi (under mpirun);\n"
      "                     several, comma separated (shm,tcp,mpi), time each row on every one\n"
      "                     and print them side by side\n"
      "  --dtype NAME       f32 (default), f64, f16, bf16, i8, u8, i32, i64, bool\n"
      "  --reduce-op NAME   sum (default), avg, prod, min, max, band, bor, bxor\n"
      "  --root R           root of broadcast, reduce, gather and scatter (default 0)\n"
      "  --min-bytes N      smallest message (default 4); suffixes K, M, G\n"
      "  --max-bytes N      largest message (default 64M)\n"
      "  --step-factor F    multiply the size by F per row (default 2)\n"
      "  --iters N          timed iterations per row (default: by size, ",
      kMinIters, " to ", kMaxIters,
      ")\n"
      "  --warmup N         untimed iterations per row (default: iters / 10, at least 1)\n"
      "  --buffers KIND     private (default: plain memory of each rank) or shared (from\n"
      "                     ProcessGroup::allocate: on shm, collectives skip the copies)\n"
      "  --check            verify every row against its closed form (default)\n"
      "  --no-check         skip the verification\n"
      "  --nranks N         start N local ranks (MASTER_ADDR=127.0.0.1) and wait for them\n"
      "  --master-port P    port of the local ranks' store (default: a free one)\n"
      "  -h, --help         this text\n"
      "\n"
      "Sizes follow nccl-tests: for all_gather, reduce_scatter, all_to_all, gather and scatter\n"
      "the size is the whole buffer of n slots, one per rank (rounded to a multiple of n).\n"
      "Exit codes: 0 ok, 1 a failure or a WRONG result, 2 a bad command line.\n");
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
  return static_cast<int>(std::clamp<size_t>((size_t{1} << 20) / std::max<size_t>(bytes, 1), 1, 100));
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
