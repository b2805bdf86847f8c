#include "cli/bench_table.h"

#include <algorithm>
#include <cstdio>

namespace lockstep::cli::bench {
namespace {

template <class... Args>
std::string printf_string(const char* format, Args... args) {
  char buffer[512];
  int n = std::snprintf(buffer, sizeof(buffer), format, args...);
  return std::string(buffer,
                     n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof(buffer) - 1));
}

std::string check_text(const Row& row, const TableInfo& info) {
  if (!info.check) return "-";
  return row.wrong == 0 ? "ok" : "WRONG";
}

}  // namespace

double algbw_gbps(const Row& row) {
  return row.median_us > 0 ? static_cast<double>(row.bytes) / row.median_us / 1e3 : 0.0;
}

double busbw_gbps(const Row& row, const TableInfo& info) {
  return algbw_gbps(row) * busbw_factor(info.params.op, info.world_size);
}

std::string format_memcpy_line(const MemcpyBandwidth& m) {
  return printf_string("# memcpy: %.2f GB/s (one core, %zu MiB, fastest of %d copies)\n", m.gbps,
                       m.bytes >> 20, m.repetitions);
}

std::string format_table_header(const TableInfo& info) {
  const OpParams& p = info.params;
  std::string line = "# " + std::string(bench_op_name(p.op)) + ": backend " + info.backend + ", " +
                     std::to_string(info.world_size) + " ranks, dtype " +
                     std::string(dtype_name(p.dtype));
  if (bench_op_reduces(p.op)) line += ", reduce op " + std::string(reduce_op_name(p.reduce_op));
  if (bench_op_rooted(p.op)) line += ", root " + std::to_string(p.root);
  if (info.shared_buffers) line += ", buffers from allocate";
  line += printf_string(", busbw = algbw x %.3f\n", busbw_factor(p.op, info.world_size));
  line += printf_string("#%13s %12s %6s %6s %11s %12s %12s %8s %6s\n", "size(B)", "count", "dtype",
                        "iters", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "%memcpy", "check");
  return line;
}

std::string format_row(const Row& row, const TableInfo& info, double memcpy_gbps) {
  const double busbw = busbw_gbps(row, info);
  const double share = memcpy_gbps > 0 ? 100.0 * busbw / memcpy_gbps : 0.0;
  return printf_string("%14zu %12zu %6s %6d %11.1f %12.3f %12.3f %7.1f%% %6s\n", row.bytes,
                       row.count, std::string(dtype_name(info.params.dtype)).c_str(), row.iters,
                       row.median_us, algbw_gbps(row), busbw, share, check_text(row, info).c_str());
}

std::string format_table_summary(const std::vector<Row>& rows, const TableInfo& info,
                                 double memcpy_gbps) {
  const Row* peak = nullptr;
  size_t wrong_rows = 0;
  for (const Row& row : rows) {
    if (!peak || busbw_gbps(row, info) > busbw_gbps(*peak, info)) peak = &row;
    if (row.wrong > 0) ++wrong_rows;
  }
  std::string out = "# " + std::string(bench_op_name(info.params.op)) + ":";
  if (peak) {
    const double busbw = busbw_gbps(*peak, info);
    out += printf_string(" peak busbw %.3f GB/s at %zu B (%.1f%% of memcpy);", busbw, peak->bytes,
                         memcpy_gbps > 0 ? 100.0 * busbw / memcpy_gbps : 0.0);
  }
  if (!info.check) return out + " not checked\n";
  if (wrong_rows == 0) return out + printf_string(" all %zu rows ok\n", rows.size());
  return out + printf_string(" %zu of %zu rows WRONG\n", wrong_rows, rows.size());
}

}  // namespace lockstep::cli::bench
