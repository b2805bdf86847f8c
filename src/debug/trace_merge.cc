#include "debug/trace_merge.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "debug/flight_recorder_json.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

namespace fs = std::filesystem;
using json::OrderedJson;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool looks_like_dump(const std::string& text) {
  return text.find(std::string("\"") + kDumpFormat + "\"") != std::string::npos;
}

int64_t earliest_us(const std::vector<Dump>& dumps) {
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (const Dump& d : dumps)
    for (const OpRecord& r : d.ops)
      if (r.enqueued_us > 0) t0 = std::min(t0, r.enqueued_us);
  return t0 == std::numeric_limits<int64_t>::max() ? 0 : t0;
}

// One "X" event: from the start (or the queueing, for an op that never started) to the end (or
// the dump, for an op that never ended).
OrderedJson op_event(const OpRecord& r, int pid, int tid, int64_t dumped_us, int64_t t0) {
  int64_t begin = r.started_us > 0 ? r.started_us : r.enqueued_us;
  int64_t end = r.ended_us > 0 ? r.ended_us : std::max(dumped_us, begin);
  OrderedJson args = {{"seq", r.seq},     {"op", r.op},       {"dtype", r.dtype},
                      {"count", r.count}, {"bytes", r.bytes}, {"state", op_state_name(r.state)}};
  if (!r.reduce_op.empty()) args["reduce_op"] = r.reduce_op;
  if (r.root >= 0) args["root"] = r.root;
  if (r.peer >= 0) args["peer"] = r.peer;
  if (r.started_us > 0) args["queued_us"] = r.started_us - r.enqueued_us;
  return {{"name", r.label()},
          {"cat", r.op},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", begin - t0},
          {"dur", std::max<int64_t>(end - begin, 1)},
          {"args", std::move(args)}};
}

OrderedJson metadata(const char* name, int pid, int tid, const std::string& value) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}};
}

OrderedJson sort_index(const char* name, int pid, int tid, int index) {
  return {
      {"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", index}}}};
}

}  // namespace

LoadedDumps load_dumps(const std::string& dir) {
  std::error_code ec;
  LOCKSTEP_ENFORCE(fs::is_directory(dir, ec), InvalidArgument, dir,
                   " is not a directory; pass the LOCKSTEP_TRACE_DIR of the failed job "
                   "(default ./lockstep-trace)");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  LOCKSTEP_ENFORCE(!ec, InvalidArgument, "cannot list ", dir, ": ", ec.message());
  std::vector<DumpFile> read;
  LoadedDumps unreadable;
  for (const fs::path& file : files) {
    try {
      read.push_back({file.string(), read_file(file)});
    } catch (const std::exception& e) {
      unreadable.problems.push_back(file.string() + ": " + e.what());
    }
  }
  LoadedDumps out = parse_dumps(read);
  out.problems.insert(out.problems.begin(), unreadable.problems.begin(), unreadable.problems.end());
  return out;
}

LoadedDumps parse_dumps(const std::vector<DumpFile>& files) {
  LoadedDumps out;
  for (const DumpFile& file : files) {
    try {
      if (!looks_like_dump(file.text)) continue;
      out.dumps.push_back(dump_from_json(file.text, file.path));
    } catch (const std::exception& e) {
      std::string what = e.what();
      out.problems.push_back(what.rfind(file.path, 0) == 0 ? what : file.path + ": " + what);
    }
  }
  std::sort(out.dumps.begin(), out.dumps.end(), [](const Dump& a, const Dump& b) {
    return std::tie(a.group, a.rank, a.dumped_us) > std::tie(b.group, b.rank, b.dumped_us);
  });
  // Several dumps of one rank (restarts of the job): keep the newest.
  auto same_rank = [](const Dump& a, const Dump& b) {
    return a.group == b.group && a.rank == b.rank;
  };
  for (size_t i = 1; i < out.dumps.size(); ++i)
    if (same_rank(out.dumps[i], out.dumps[i - 1]))
      out.problems.push_back(detail::concat("pid ", out.dumps[i].pid, ": an older dump of group '",
                                            out.dumps[i].group, "' rank ", out.dumps[i].rank,
                                            " (ignored; the newest is used)"));
  out.dumps.erase(std::unique(out.dumps.begin(), out.dumps.end(), same_rank), out.dumps.end());
  std::reverse(out.dumps.begin(), out.dumps.end());
  return out;
}

std::string chrome_trace(const std::vector<Dump>& dumps, const std::string& verdict) {
  std::map<std::string, int> group_tid;
  for (const Dump& d : dumps) group_tid.emplace(d.group, 0);
  int next = 0;
  for (auto& [name, tid] : group_tid) tid = next++;
  int64_t t0 = earliest_us(dumps);
  OrderedJson events = OrderedJson::array();
  for (const Dump& d : dumps) {
    int pid = d.global_rank, tid = group_tid[d.group];
    events.push_back(
        metadata("process_name", pid, 0,
                 detail::concat("rank ", d.global_rank, " (", d.host, ", pid ", d.pid, ")")));
    events.push_back(sort_index("process_sort_index", pid, 0, d.global_rank));
    events.push_back(
        metadata("thread_name", pid, tid,
                 detail::concat("group '", d.group, "' rank ", d.rank, " of ", d.size)));
    events.push_back(sort_index("thread_sort_index", pid, tid, tid));
    for (const OpRecord& r : d.ops) events.push_back(op_event(r, pid, tid, d.dumped_us, t0));
  }
  OrderedJson doc = {{"traceEvents", std::move(events)},
                     {"displayTimeUnit", "ms"},
                     {"otherData", {{"origin_us", t0}, {"verdict", verdict}}}};
  return json::to_text(doc);
}

}  // namespace lockstep::debug
