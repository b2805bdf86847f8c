#include "launcher/elastic_records.h"

#include <charconv>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> fields;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, separator);) fields.push_back(field);
  return fields;
}

int number(const std::string& text, const char* name, int min, int max, const std::string& whole,
           const char* what) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max)
    throw StoreError(detail::concat("malformed ", what, " '", whole, "': ", name, " '", text,
                                    "' is not a whole number in [", min, ", ", max,
                                    "]; every node must run the same lockstep version"));
  return value;
}

}  // namespace

std::string elastic_entry(const ElasticNode& node) {
  return detail::concat(node.id, '\t', node.host, '\t', node.pid, '\t', node.nproc, '\t',
                        node.max_restarts);
}

ElasticNode parse_elastic_entry(const std::string& text) {
  auto f = split(text, '\t');
  constexpr const char* kWhat = "elastic registration";
  if (f.size() < 5)
    throw StoreError(detail::concat("malformed ", kWhat, " '", text,
                                    "': every node must run the same lockstep version"));
  // The ranges of --nproc-per-node and --max-restarts (launcher/options.cc).
  return ElasticNode{.id = number(f[0], "id", 0, 1 << 30, text, kWhat),
                     .host = f[1],
                     .pid = number(f[2], "pid", 0, 1 << 30, text, kWhat),
                     .nproc = number(f[3], "nproc", 1, 1 << 16, text, kWhat),
                     .max_restarts = number(f[4], "max_restarts", 0, 1 << 20, text, kWhat)};
}

std::string round_record(const ElasticRound& round) {
  std::string text = detail::concat(round.run_id, '\t', round.master_port, '\t',
                                    round.restart_count, '\t', round.max_restarts);
  for (const auto& member : round.members) text += "\n" + elastic_entry(member);
  return text;
}

ElasticRound parse_round_record(int round, const std::string& text) {
  auto lines = split(text, '\n');
  constexpr const char* kWhat = "elastic round record";
  auto head = lines.empty() ? std::vector<std::string>() : split(lines[0], '\t');
  if (head.size() < 4 || lines.size() < 2)
    throw StoreError(detail::concat("malformed ", kWhat, " '", text,
                                    "': every node must run the same lockstep version"));
  ElasticRound parsed{.round = round,
                      .run_id = head[0],
                      .master_port = number(head[1], "master_port", 1, 65535, text, kWhat),
                      .restart_count = number(head[2], "restart_count", 0, 1 << 30, text, kWhat),
                      .max_restarts = number(head[3], "max_restarts", 0, 1 << 20, text, kWhat)};
  for (size_t i = 1; i < lines.size(); ++i) parsed.members.push_back(parse_elastic_entry(lines[i]));
  return parsed;
}

std::string describe_node(int node_rank, const ElasticNode& node) {
  return detail::concat("node ", node_rank, " (", node.host, ", launcher pid ", node.pid, ")");
}

std::optional<WorldLayout> layout_in_round(const ElasticRound& round, int id, int max_restarts) {
  WorldLayout layout{.run_id = round.run_id,
                     .master_port = round.master_port,
                     .attempt = round.round,
                     .node_rank = -1,
                     .restart_count = round.restart_count};
  for (size_t r = 0; r < round.members.size(); ++r) {
    const ElasticNode& m = round.members[r];
    if (m.id == id) {
      layout.node_rank = static_cast<int>(r);
      layout.rank_offset = layout.world_size;
    }
    if (layout.world_size > (1 << 30) - m.nproc)
      throw StoreError("the nodes registered more than 2^30 processes in all");
    layout.world_size += m.nproc;
    layout.nodes.push_back(NodeInfo{m.host, m.nproc, m.max_restarts});
  }
  if (layout.node_rank < 0) return std::nullopt;
  if (max_restarts != round.max_restarts)
    throw ConfigError(detail::concat("this node runs with --max-restarts ", max_restarts,
                                     " but the store's host (", round.members.front().host,
                                     ") with ", round.max_restarts,
                                     "; every node must run the same command"));
  return layout;
}

}  // namespace lockstep::launcher
