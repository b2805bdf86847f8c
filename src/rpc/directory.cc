#include "rpc/directory.h"

#include <charconv>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"

namespace lockstep::rpc {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    parts.push_back(s.substr(start, p - start));
    if (p == std::string::npos) return parts;
    start = p + 1;
  }
}

bool parse_int(const std::string& s, long long& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

std::string worker_key(int rank) {
  return "worker/" + std::to_string(rank);
}

}  // namespace

std::string done_key(int rank) {
  return "done/" + std::to_string(rank);
}

std::string format_record(const WorkerRecord& r) {
  return detail::concat(r.info.name, "|", r.info.host, "|", r.info.pid, "|", r.address, "|",
                        r.port);
}

WorkerRecord parse_record(const std::string& text, int rank) {
  auto parts = split(text, '|');
  long long pid = 0, port = 0;
  if (parts.size() != 5 || parts[0].empty() || !parse_int(parts[2], pid) ||
      !parse_int(parts[4], port) || port <= 0 || port > 65535)
    throw NetworkError(detail::concat("rpc: rank ", rank, "'s worker record '", text,
                                      "' is malformed (another program's key in the store?)"));
  WorkerRecord r;
  r.info = WorkerInfo{parts[0], rank, parts[1], static_cast<int>(pid)};
  r.address = parts[3];
  r.port = static_cast<uint16_t>(port);
  return r;
}

void check_worker_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128;
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-' || c == '.' || c == ':');
  LOCKSTEP_ENFORCE(ok, ConfigError, "init_rpc: the worker name '", name,
                   "' must be 1 to 128 characters of A-Z a-z 0-9 _ - . :");
}

std::vector<WorkerRecord> join_directory(Store& store, const WorkerRecord& me, int world_size,
                                         std::chrono::milliseconds timeout) {
  const std::string rank = std::to_string(me.info.id);
  std::string holder = store.compare_set("name/" + me.info.name, "", rank);
  LOCKSTEP_ENFORCE(holder == rank, ConfigError, "init_rpc: rank ", rank, " asked for the name '",
                   me.info.name, "', which rank ", holder,
                   " already has: every worker needs a name of its own");
  std::string mine = format_record(me);
  std::string was = store.compare_set(worker_key(me.info.id), "", mine);
  LOCKSTEP_ENFORCE(was == mine, ConfigError, "init_rpc: rank ", rank, " joined twice (as '",
                   parse_record(was, me.info.id).info.name, "' and '", me.info.name,
                   "'): two processes have the same rank");
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(worker_key(r));
  try {
    store.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::string missing;
    int count = 0;
    for (int r = 0; r < world_size; ++r)
      if (!store.check({keys[static_cast<size_t>(r)]}) && count++ < 32)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    if (count > 32) missing += detail::concat(" and ", count - 32, " more");
    throw TimeoutError(detail::concat("init_rpc: ranks [", missing, "] of ", world_size,
                                      " never joined within ", timeout.count() / 1000.0,
                                      " s. Did they start, with the same rendezvous?"));
  }
  std::vector<std::string> values = store.multi_get(keys, timeout);
  std::vector<WorkerRecord> records;
  for (int r = 0; r < world_size; ++r)
    records.push_back(parse_record(values[static_cast<size_t>(r)], r));
  return records;
}

}  // namespace lockstep::rpc
