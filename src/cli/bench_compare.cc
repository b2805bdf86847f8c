#include "cli/bench_compare.h"

#include <algorithm>

#include "cli/bench_memcpy.h"
#include "cli/bench_ops.h"
#include "cli/bench_runner.h"
#include "cli/bench_table.h"

namespace lockstep::cli::bench {
namespace {

std::string header(const std::vector<std::shared_ptr<ProcessGroup>>& groups, const OpParams& p) {
  const int n = groups[0]->size();
  std::string line =
      detail::concat("# ", bench_op_name(p.op), ": ", n, " ranks, dtype ", dtype_name(p.dtype));
  if (bench_op_reduces(p.op)) line += detail::concat(", reduce op ", reduce_op_name(p.reduce_op));
  if (bench_op_rooted(p.op)) line += detail::concat(", root ", p.root);
  char buf[160];
  std::snprintf(buf, sizeof(buf), ", busbw = algbw x %.3f; per backend: time(us) busbw(GB/s)\n",
                busbw_factor(p.op, n));
  line += buf;
  std::snprintf(buf, sizeof(buf), "#%13s %12s", "size(B)", "count");
  line += buf;
  for (const auto& g : groups) {
    std::snprintf(buf, sizeof(buf), " %11s %11s", (g->backend_name() + " us").c_str(),
                  (g->backend_name() + " GB/s").c_str());
    line += buf;
  }
  return line + "  check\n";
}

std::string row_text(const std::vector<Row>& rows, const TableInfo& info) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%14zu %12zu", rows[0].bytes, rows[0].count);
  std::string line = buf;
  bool wrong = false;
  for (const Row& r : rows) {
    std::snprintf(buf, sizeof(buf), " %11.1f %11.3f", r.median_us, busbw_gbps(r, info));
    line += buf;
    wrong = wrong || r.wrong > 0;
  }
  return line + (info.check ? (wrong ? "  WRONG\n" : "  ok\n") : "  -\n");
}

size_t run_table(const std::vector<std::shared_ptr<ProcessGroup>>& groups, const OpParams& p,
                 const BenchOptions& options, std::FILE* out) {
  ProcessGroup& first = *groups[0];
  const bool printer = first.rank() == 0;
  const TableInfo info{.params = p, .world_size = first.size(), .check = options.check};
  if (printer) std::fputs(header(groups, p).c_str(), out);
  size_t wrong_rows = 0, previous_bytes = 0;
  for (size_t s : message_sizes(options)) {
    const Layout l = layout_for(p.op, s, p.dtype, first.size());
    if (l.bytes == previous_bytes) continue;  // rounding to n slots made it the same row
    previous_bytes = l.bytes;
    std::vector<Row> rows;
    for (const auto& g : groups) rows.push_back(measure_row(*g, p, options, l));
    if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.wrong > 0; }))
      ++wrong_rows;
    if (printer) {
      std::fputs(row_text(rows, info).c_str(), out);
      std::fflush(out);
    }
  }
  return wrong_rows;
}

}  // namespace

std::vector<std::string> backend_list(const std::string& backend_option) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= backend_option.size()) {
    size_t comma = backend_option.find(',', start);
    if (comma == std::string::npos) comma = backend_option.size();
    names.push_back(backend_option.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

size_t run_comparison(const std::vector<std::shared_ptr<ProcessGroup>>& groups,
                      const BenchOptions& options, std::FILE* out) {
  ProcessGroup& first = *groups[0];
  if (std::any_of(options.ops.begin(), options.ops.end(), bench_op_rooted) &&
      options.root >= first.size())
    throw UsageError(detail::concat("--root ", options.root, " is not a rank of this ",
                                    first.size(), "-rank job"));
  first.barrier()->wait();
  MemcpyBandwidth memcpy_bw;
  if (first.rank() == 0) {
    memcpy_bw = measure_memcpy();
    std::fputs(format_memcpy_line(memcpy_bw).c_str(), out);
  }
  first.barrier()->wait();
  size_t wrong_rows = 0;
  for (size_t i = 0; i < options.ops.size(); ++i) {
    if (first.rank() == 0 && i > 0) std::fputs("#\n", out);
    wrong_rows += run_table(groups,
                            {.op = options.ops[i],
                             .dtype = options.dtype,
                             .reduce_op = options.reduce_op,
                             .root = options.root},
                            options, out);
  }
  std::fflush(out);
  return wrong_rows;
}

}  // namespace lockstep::cli::bench
