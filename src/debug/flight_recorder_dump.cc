#include "debug/flight_recorder_dump.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "debug/flight_recorder_json.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

namespace fs = std::filesystem;
using json::OrderedJson;

// Times are microseconds since 1970 (0 or less: not yet), so no real one is near this bound
// (about 73,000 years either way); within it, `lockstep trace` can subtract any two of them
// without overflowing.
constexpr int64_t kMaxTimeUs = int64_t{1} << 61;

// The largest group a dump may claim: the trace's verdict keeps a slot and prints a line item per
// rank of a group, so a dump claiming a group of 2^31 ranks must not make it allocate for that
// many. No job comes near it.
constexpr int kMaxGroupSize = 1 << 20;

int64_t time_us(const json::Json& obj, std::string_view key) {
  const int64_t t = json::integer(obj, key);
  LOCKSTEP_ENFORCE(t >= -kMaxTimeUs && t <= kMaxTimeUs, InvalidArgument, "JSON: member \"", key,
                   "\" is not a time in microseconds since 1970: ", t);
  return t;
}

std::string file_safe(std::string name) {
  for (char& c : name)
    if (c == '/' || c == '\\' || c == ' ') c = '_';
  return name;
}

OrderedJson op_to_json(const OpRecord& r) {
  return {{"id", r.id},
          {"seq", r.seq},
          {"op", r.op},
          {"dtype", r.dtype},
          {"reduce_op", r.reduce_op},
          {"root", r.root},
          {"peer", r.peer},
          {"count", r.count},
          {"bytes", r.bytes},
          {"state", op_state_name(r.state)},
          {"enqueued_us", r.enqueued_us},
          {"started_us", r.started_us},
          {"ended_us", r.ended_us}};
}

OpRecord op_from_json(const json::Json& v) {
  OpRecord r{.id = json::unsigned_integer(v, "id"),
             .seq = json::unsigned_integer(v, "seq"),
             .op = json::string(v, "op"),
             .dtype = json::string(v, "dtype"),
             .reduce_op = json::string(v, "reduce_op"),
             .root = json::int32(v, "root"),
             .peer = json::int32(v, "peer"),
             .count = json::unsigned_integer(v, "count"),
             .bytes = json::unsigned_integer(v, "bytes"),
             .enqueued_us = time_us(v, "enqueued_us"),
             .started_us = time_us(v, "started_us"),
             .ended_us = time_us(v, "ended_us")};
  const std::string& state = json::string(v, "state");
  auto parsed = parse_op_state(state);
  LOCKSTEP_ENFORCE(parsed.has_value(), InvalidArgument, "op ", r.label(), " has state \"", state,
                   "\"; expected queued, started, completed or failed");
  r.state = *parsed;
  return r;
}

}  // namespace

std::string dump_path(const std::string& dir, const std::string& group, int rank, int pid) {
  return (fs::path(dir) / detail::concat(file_safe(group), "-rank", rank, "-pid", pid, ".json"))
      .string();
}

std::string dump_to_json(const Dump& d) {
  OrderedJson ops = OrderedJson::array();
  for (const OpRecord& r : d.ops) ops.push_back(op_to_json(r));
  OrderedJson doc = {{"format", kDumpFormat},
                     {"version", 1},
                     {"group", d.group},
                     {"rank", d.rank},
                     {"size", d.size},
                     {"global_rank", d.global_rank},
                     {"host", d.host},
                     {"pid", d.pid},
                     {"backend", d.backend},
                     {"reason", d.reason},
                     {"dumped_us", d.dumped_us},
                     {"capacity", d.capacity},
                     {"recorded", d.recorded},
                     {"entered", d.progress.entered},
                     {"completed", d.progress.completed},
                     {"ops", std::move(ops)}};
  return json::to_text(doc, 1);
}

std::string write_dump(const Dump& dump, const std::string& dir) {
  std::string path = dump_path(dir, dump.group, dump.rank, dump.pid);
  std::string tmp = path + ".tmp";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(detail::concat("cannot create the trace directory ", dir, ": ", ec.message(),
                               " (set LOCKSTEP_TRACE_DIR to a writable directory)"));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << dump_to_json(dump);
    out.close();
    if (!out)
      throw Error(detail::concat("cannot write ", tmp, ": ", std::strerror(errno),
                                 " (set LOCKSTEP_TRACE_DIR to a writable directory)"));
  }
  fs::rename(tmp, path, ec);
  if (ec) throw Error(detail::concat("cannot rename ", tmp, " to ", path, ": ", ec.message()));
  return path;
}

Dump dump_from_json(const std::string& text, const std::string& origin) {
  try {
    json::Json v = json::parse(text);
    const json::Json* format = v.is_object() && v.contains("format") ? &v["format"] : nullptr;
    LOCKSTEP_ENFORCE(format && format->is_string() && *format == kDumpFormat, InvalidArgument,
                     "not a lockstep flight-recorder dump (no \"format\": \"", kDumpFormat, "\")");
    Dump d{.group = json::string(v, "group"),
           .rank = json::int32(v, "rank"),
           .size = json::int32(v, "size"),
           .global_rank = json::int32(v, "global_rank"),
           .host = json::string(v, "host"),
           .pid = json::int32(v, "pid"),
           .backend = json::string(v, "backend"),
           .reason = json::string(v, "reason"),
           .dumped_us = time_us(v, "dumped_us"),
           .capacity = json::unsigned_integer(v, "capacity"),
           .recorded = json::unsigned_integer(v, "recorded"),
           .progress = {.entered = json::unsigned_integer(v, "entered"),
                        .completed = json::unsigned_integer(v, "completed")}};
    LOCKSTEP_ENFORCE(d.size >= 1 && d.size <= kMaxGroupSize, InvalidArgument, "a group of size ",
                     d.size, " is not one a job can have (1 to ", kMaxGroupSize, " ranks)");
    LOCKSTEP_ENFORCE(d.rank >= 0 && d.rank < d.size, InvalidArgument, "rank ", d.rank,
                     " is not in a group of size ", d.size);
    const auto& ops = json::array(v, "ops");
    for (size_t i = 0; i < ops.size(); ++i) {
      try {
        d.ops.push_back(op_from_json(ops[i]));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("ops[", i, "]: ", e.what()));
      }
    }
    return d;
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat(origin, ": ", e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(detail::concat(origin, ": invalid dump: ", e.what()));
  }
}

}  // namespace lockstep::debug
