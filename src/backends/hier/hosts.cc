#include "backends/hier/hosts.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string_view>

#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
#include "net/socket.h"

namespace lockstep::hier {

namespace {

// Entry `index` of a comma-separated list, or nothing when the list is shorter.
std::optional<std::string> list_entry(std::string_view list, int index) {
  for (int i = 0;; ++i) {
    size_t comma = list.find(',');
    if (i == index) return std::string(list.substr(0, comma));
    if (comma == std::string_view::npos) return std::nullopt;
    list.remove_prefix(comma + 1);
  }
}

// LOCKSTEP_HOST_ID, a test hook, read at each use (tests change it within one process); a list
// form is looked up per rank.
std::optional<std::string> host_id_override(int global_rank) {
  const std::optional<std::string> v = live_setting(LiveSetting::host_id);
  if (!v) return std::nullopt;
  std::string_view text(*v);
  if (text.find(',') == std::string_view::npos) return std::string(text);
  auto entry = list_entry(text, global_rank);
  LOCKSTEP_ENFORCE(entry && !entry->empty(), ConfigError, "LOCKSTEP_HOST_ID='", text,
                   "' has no entry for rank ", global_rank,
                   " (a list needs one value per rank of the default group)");
  return entry;
}

}  // namespace

std::string host_identity(int global_rank) {
  if (auto id = host_id_override(global_rank)) return "override:" + *id;
  return net::host_identity();
}

std::vector<int> HostMap::leaders() const {
  std::vector<int> out;
  for (size_t h = 0; h < hosts.size(); ++h) out.push_back(leader(static_cast<int>(h)));
  return out;
}

bool HostMap::is_multi_host_with_shared_hosts() const {
  if (hosts.size() < 2) return false;
  for (const auto& ranks : hosts)
    if (ranks.size() > 1) return true;
  return false;
}

HostMap map_hosts(const std::vector<std::string>& ids) {
  HostMap map;
  std::map<std::string, int> index;  // identity -> host index
  for (size_t r = 0; r < ids.size(); ++r) {
    auto [it, fresh] = index.emplace(ids[r], static_cast<int>(map.hosts.size()));
    if (fresh) map.hosts.emplace_back();
    map.hosts[static_cast<size_t>(it->second)].push_back(static_cast<int>(r));
    map.host_of.push_back(it->second);
  }
  return map;
}

HostMap exchange_hosts(const GroupConfig& config) {
  const std::string prefix = config.name + "/hosts/";
  const int global_rank = config.global_ranks.empty()
                              ? config.rank
                              : config.global_ranks[static_cast<size_t>(config.rank)];
  config.store->set(prefix + std::to_string(config.rank), host_identity(global_rank));
  std::vector<std::string> keys;
  for (int r = 0; r < config.size; ++r) keys.push_back(prefix + std::to_string(r));
  return map_hosts(config.store->multi_get(keys, config.timeout));
}

}  // namespace lockstep::hier
