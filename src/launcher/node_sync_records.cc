#include "launcher/node_sync_records.h"

#include <algorithm>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

std::vector<std::string> split_tabs(const std::string& text) {
  std::vector<std::string> fields;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, '\t');) fields.push_back(field);
  return fields;
}

}  // namespace

std::string node_entry(const NodeInfo& node, const std::string& run_id,
                       std::optional<int> master_port) {
  std::string entry =
      detail::concat(node.host, '\t', node.nproc, '\t', node.max_restarts, '\t', run_id);
  if (master_port) entry += detail::concat('\t', *master_port);
  return entry;
}

WorldLayout parse_world_layout(const std::vector<std::string>& entries, int node_rank,
                               int max_restarts) {
  WorldLayout layout;
  for (size_t r = 0; r < entries.size(); ++r) {
    auto fields = split_tabs(entries[r]);
    if (fields.size() < 4)
      throw StoreError(
          detail::concat("node ", r, " registered a malformed entry '", entries[r], "'"));
    NodeInfo info{fields[0], std::stoi(fields[1]), std::stoi(fields[2])};
    if (info.max_restarts != max_restarts)
      throw ConfigError(detail::concat("node ", r, " (", info.host, ") runs with --max-restarts ",
                                       info.max_restarts, " but node ", node_rank, " with ",
                                       max_restarts, "; every node must run the same command"));
    if (static_cast<int>(r) < node_rank) layout.rank_offset += info.nproc;
    layout.world_size += info.nproc;
    if (r == 0) {
      layout.run_id = fields[3];
      if (fields.size() < 5)
        throw StoreError(detail::concat("node 0 registered no MASTER_PORT ('", entries[r],
                                        "'): every node must run the same lockstep version"));
      layout.master_port = std::stoi(fields[4]);
    }
    layout.nodes.push_back(info);
  }
  return layout;
}

std::string failure_report(const RemoteFailure& failure) {
  std::string what = failure.what;  // one field: no tabs or line breaks
  std::replace_if(
      what.begin(), what.end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
  return detail::concat(failure.node_rank, '\t', failure.exit_code, '\t', what, '\t',
                        failure.restartable ? 1 : 0);
}

RemoteFailure parse_failure_report(const std::string& text) {
  auto fields = split_tabs(text);
  if (fields.size() < 4)
    return RemoteFailure{.node_rank = 0, .exit_code = 1, .what = "malformed failure report"};
  return RemoteFailure{.node_rank = std::stoi(fields[0]),
                       .exit_code = std::stoi(fields[1]),
                       .what = fields[2],
                       .restartable = fields[3] == "1"};
}

}  // namespace lockstep::launcher
