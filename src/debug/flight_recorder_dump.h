// The flight-recorder dump: one JSON file per rank and group, written when an op of the group
// times out or fails, and read back by `lockstep trace` (src/debug/trace_merge.h).
//
// File: <dir>/<group>-rank<R>-pid<P>.json, with '/' in the group name replaced by '_'.
// Content (docs/diagnostics.md): {"format": "lockstep-flight-recorder", "version": 1, "group",
// "rank", "size", "global_rank", "host", "pid", "backend", "reason", "dumped_us", "capacity",
// "recorded", "entered", "completed", "ops": [{"id", "seq", "op", "dtype", "reduce_op", "root",
// "peer", "count", "bytes", "state", "enqueued_us", "started_us", "ended_us"}, ...]}.
#pragma once

#include <string>
#include <vector>

#include "debug/flight_recorder.h"

namespace lockstep::debug {

inline constexpr const char* kDumpFormat = "lockstep-flight-recorder";

struct Dump {
  std::string group;
  int rank = 0;
  int size = 1;
  int global_rank = 0;
  std::string host;
  int pid = 0;
  std::string backend;
  std::string reason;  // the error that caused the dump
  int64_t dumped_us = 0;
  uint64_t capacity = 0;
  uint64_t recorded = 0;  // ops recorded in all (more than ops.size() once the ring wrapped)
  Progress progress;      // entered/completed counts of collectives when dumped
  std::vector<OpRecord> ops;
};

// "<dir>/<group>-rank<R>-pid<P>.json".
std::string dump_path(const std::string& dir, const std::string& group, int rank, int pid);
std::string dump_to_json(const Dump& dump);
// Writes the dump into dir (created if needed; the file appears whole, via a rename) and returns
// its path. Throws Error naming the path when it cannot.
std::string write_dump(const Dump& dump, const std::string& dir);
// Parses a dump. Throws InvalidArgument naming what is wrong (`origin` names the source).
Dump dump_from_json(const std::string& text, const std::string& origin);

}  // namespace lockstep::debug
