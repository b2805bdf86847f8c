#include "cli/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench_check.h"
#include "cli/bench_memcpy.h"
#include "cli/bench_ops.h"
#include "cli/bench_table.h"

namespace lockstep::cli::bench {
namespace {

// Up to this size, the first row of a table is run once untimed first (run_table).
constexpr size_t kUntimedFirstRowBytes = size_t{1} << 20;

// One rank's input and output memory for a whole table, sized for its largest row and written
// once up front so that page faults never land in a timed iteration.
struct Buffers {
  SharedBuffer input, output;
};

// Plain memory (new[] value-initialises: every page is touched here), or with --buffers shared
// memory from pg.allocate (collective; zero-filled and mapped up front).
SharedBuffer buffer_of(ProcessGroup& pg, size_t bytes, bool shared) {
  if (shared) return pg.allocate(bytes);
  return SharedBuffer(std::shared_ptr<std::byte[]>(new std::byte[bytes]()), bytes, false);
}

Buffers allocate_for(ProcessGroup& pg, const OpParams& p, const std::vector<size_t>& sizes,
                     bool shared) {
  size_t in_bytes = 0, out_bytes = 0;
  for (size_t s : sizes) {
    Layout l = layout_for(p.op, s, p.dtype, pg.size());
    in_bytes = std::max(in_bytes, l.input_count * element_size(p.dtype));
    out_bytes = std::max(out_bytes, l.output_count * element_size(p.dtype));
  }
  return Buffers{buffer_of(pg, std::max<size_t>(in_bytes, 1), shared),
                 buffer_of(pg, std::max<size_t>(out_bytes, 1), shared)};
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Times one row and checks it. Returns the row as every rank agrees on it.
Row run_row(ProcessGroup& pg, const OpParams& p, const BenchOptions& options, const Layout& l,
            Buffers& buffers) {
  BufferView in{buffers.input.data(), l.input_count, p.dtype};
  BufferView out{buffers.output.data(), l.output_count, p.dtype};
  fill_for_check(p, pg.rank(), in, out);
  const int iters = iterations_for(options, l.bytes);
  for (int i = warmup_for(options, l.bytes); i > 0; --i) run_op(pg, p, in, out);
  // results[i]: this rank's time of iteration i in us; results[iters]: its wrong elements.
  std::vector<double> results(static_cast<size_t>(iters) + 1, 0.0);
  const int runs = runs_per_iteration(p.op, l.bytes);
  for (int i = 0; i < iters; ++i) {
    pg.barrier()->wait();
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < runs; ++r) run_op(pg, p, in, out);
    auto stop = std::chrono::steady_clock::now();
    results[static_cast<size_t>(i)] =
        std::chrono::duration<double, std::micro>(stop - start).count() / runs;
  }
  if (options.check) {
    fill_for_check(p, pg.rank(), in, out);
    pg.barrier()->wait();
    run_op(pg, p, in, out);
    results.back() = static_cast<double>(count_wrong(p, pg.rank(), pg.size(), out));
  }
  // The slowest rank's time per iteration, and the worst rank's wrong count.
  pg.all_reduce(view(results), {.op = ReduceOp::max})->wait();
  const double wrong = results.back();
  results.pop_back();
  return Row{.bytes = l.bytes,
             .count = l.count,
             .iters = iters,
             .median_us = median(std::move(results)),
             .wrong = static_cast<size_t>(wrong)};
}

// One table: every size of options for one op. Returns how many rows were wrong.
size_t run_table(ProcessGroup& pg, const OpParams& p, const BenchOptions& options,
                 double memcpy_gbps, std::FILE* out) {
  const bool printer = pg.rank() == 0;
  const TableInfo info{.params = p,
                       .backend = pg.backend_name(),
                       .world_size = pg.size(),
                       .check = options.check,
                       .shared_buffers = options.shared_buffers};
  const std::vector<size_t> sizes = message_sizes(options);
  Buffers buffers = allocate_for(pg, p, sizes, options.shared_buffers);
  if (printer) std::fputs(format_table_header(info).c_str(), out);
  std::vector<Row> rows;
  size_t previous_bytes = 0;
  // The first row runs its path cold (first calls, lazily bound symbols, cold caches): a small
  // first row is run once untimed before it counts, so that it shows the path and not the start.
  if (!sizes.empty()) {
    Layout first = layout_for(p.op, sizes.front(), p.dtype, pg.size());
    if (first.bytes <= kUntimedFirstRowBytes) run_row(pg, p, options, first, buffers);
  }
  for (size_t s : sizes) {
    Layout l = layout_for(p.op, s, p.dtype, pg.size());
    if (l.bytes == previous_bytes) continue;  // rounding to n slots made it the same row
    previous_bytes = l.bytes;
    rows.push_back(run_row(pg, p, options, l, buffers));
    if (printer) std::fputs(format_row(rows.back(), info, memcpy_gbps).c_str(), out);
    if (printer) std::fflush(out);
  }
  if (printer) std::fputs(format_table_summary(rows, info, memcpy_gbps).c_str(), out);
  return static_cast<size_t>(
      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.wrong > 0; }));
}

}  // namespace

Row measure_row(ProcessGroup& pg, const OpParams& p, const BenchOptions& options, const Layout& l) {
  Buffers buffers = allocate_for(pg, p, {l.bytes}, options.shared_buffers);
  return run_row(pg, p, options, l, buffers);
}

size_t run_benchmark(ProcessGroup& pg, const BenchOptions& options, std::FILE* out) {
  if (std::any_of(options.ops.begin(), options.ops.end(), bench_op_rooted) &&
      options.root >= pg.size())
    throw UsageError(detail::concat("--root ", options.root, " is not a rank of this ", pg.size(),
                                    "-rank job; use a root in [0, ", pg.size() - 1, "]"));
  // Rank 0 measures memcpy while the others wait in a barrier, so nothing competes for memory.
  pg.barrier()->wait();
  MemcpyBandwidth memcpy_bw;
  if (pg.rank() == 0) {
    memcpy_bw = measure_memcpy();
    std::fputs(format_memcpy_line(memcpy_bw).c_str(), out);
  }
  pg.barrier()->wait();
  size_t wrong_rows = 0;
  for (size_t i = 0; i < options.ops.size(); ++i) {
    if (pg.rank() == 0 && i > 0) std::fputs("#\n", out);
    const OpParams p{.op = options.ops[i],
                     .dtype = options.dtype,
                     .reduce_op = options.reduce_op,
                     .root = options.root};
    wrong_rows += run_table(pg, p, options, memcpy_bw.gbps, out);
  }
  std::fflush(out);
  return wrong_rows;
}

}  // namespace lockstep::cli::bench
