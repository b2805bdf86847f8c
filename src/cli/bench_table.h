// The text `lockstep bench` prints on rank 0, nccl-tests style. Every line that is not a row of
// numbers starts with '#', so a script can read the rows as whitespace-separated fields:
//   size(B) count dtype iters time(us) algbw(GB/s) busbw(GB/s) %memcpy check
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cli/bench_memcpy.h"
#include "cli/bench_ops.h"

namespace lockstep::cli::bench {

// One table: one op over all sizes.
struct TableInfo {
  OpParams params;
  std::string backend;  // the backend in use ("tcp"), never "auto"
  int world_size = 1;
  bool check = true;
  bool shared_buffers = false;  // --buffers shared
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  int iters = 0;
  double median_us = 0;  // median over iterations of the slowest rank's time
  size_t wrong = 0;      // wrong elements on the worst rank (when checked)
};

// Derived figures of a row (GB/s = 1e9 bytes per second).
double algbw_gbps(const Row& row);
double busbw_gbps(const Row& row, const TableInfo& info);

std::string format_memcpy_line(const MemcpyBandwidth& memcpy_bw);
// "# all_reduce: backend tcp, 2 ranks, dtype f32, reduce op sum" plus the column titles.
std::string format_table_header(const TableInfo& info);
std::string format_row(const Row& row, const TableInfo& info, double memcpy_gbps);
// Peak busbw and how many rows were wrong.
std::string format_table_summary(const std::vector<Row>& rows, const TableInfo& info,
                                 double memcpy_gbps);

}  // namespace lockstep::cli::bench
