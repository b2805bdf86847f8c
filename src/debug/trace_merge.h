// `lockstep trace DIR`: merges the per-rank flight-recorder dumps of a failed job into one
// timeline (Chrome trace / Perfetto JSON) and a text verdict.
//
// Timeline: one process per global rank ("rank 3 (host, pid)"), one thread per group, one complete
// event ("ph": "X") per op from its start to its end (queued ops: from when they were queued; ops
// unfinished at the dump: until the dump), with args seq, op, dtype, count, bytes, state.
// Timestamps are microseconds since the earliest op of any dump (wall clock, so ranks on one host
// line up exactly; across hosts, as well as their clocks agree).
//
// Verdict, per group: which op the job stalled on (the first one not completed by every rank),
// which ranks are behind (never entered it, or entered it only after another rank had failed in
// it), each rank's last completed op, ops whose kind, dtype, size, root or reduce op differ across
// ranks at the same sequence number, failed ops, and the ranks whose dump is missing.
#pragma once

#include <string>
#include <vector>

#include "debug/flight_recorder_dump.h"

namespace lockstep::debug {

struct LoadedDumps {
  std::vector<Dump> dumps;            // sorted by group, then rank
  std::vector<std::string> problems;  // "<file>: <why it was skipped>"
};

// Reads every *.json file in dir that is a flight-recorder dump. Other JSON files (such as an
// earlier trace.json) are ignored; unreadable or malformed dumps are listed in problems.
// Throws InvalidArgument when dir is not a readable directory.
LoadedDumps load_dumps(const std::string& dir);

// One file of a trace directory, as read.
struct DumpFile {
  std::string path;
  std::string text;
};

// What load_dumps makes of the files it read: the dumps among them, sorted, with only the newest
// of several dumps of one rank kept; malformed dumps and the older dumps are listed in problems.
LoadedDumps parse_dumps(const std::vector<DumpFile>& files);

// The Chrome trace JSON of the dumps.
std::string chrome_trace(const std::vector<Dump>& dumps, const std::string& verdict);

// The text verdict (several lines, each ending in '\n').
std::string trace_verdict(const std::vector<Dump>& dumps);

}  // namespace lockstep::debug
