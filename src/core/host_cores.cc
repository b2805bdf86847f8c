#include "core/host_cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <string>

namespace lockstep::detail {

namespace {

std::optional<std::string> first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// This process's cpuset cgroup: the v1 hierarchy's "N:cpuset:/path" line, else the v2 "0::/path".
std::optional<std::string> cpuset_file() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::optional<std::string> v2;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first == std::string::npos ? first : first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers == "cpuset") return "/sys/fs/cgroup/cpuset" + path + "/cpuset.effective_cpus";
    if (controllers.empty()) v2 = "/sys/fs/cgroup" + path + "/cpuset.cpus.effective";
  }
  return v2;
}

int online_cores() {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

}  // namespace

int count_cpu_list(std::string_view list) {
  int count = 0;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\n')) item.remove_suffix(1);
    if (item.empty()) continue;
    unsigned low = 0, high = 0;  // unsigned: from_chars then takes no sign
    const char* end = item.data() + item.size();
    auto [p, ec] = std::from_chars(item.data(), end, low);
    if (ec != std::errc{}) return 0;
    high = low;
    if (p != end) {
      if (*p != '-') return 0;
      auto [q, ec2] = std::from_chars(p + 1, end, high);
      if (ec2 != std::errc{} || q != end || high < low) return 0;
    }
    count += static_cast<int>(high - low + 1);
  }
  return count;
}

int process_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return online_cores();
}

int host_cores() {
  static const int cores = [] {
    const int online = online_cores();
    const auto file = cpuset_file();
    const auto list = file ? first_line(*file) : std::nullopt;
    const int in_cpuset = list ? count_cpu_list(*list) : 0;
    return in_cpuset > 0 ? std::min(online, in_cpuset) : online;
  }();
  return cores;
}

bool oversubscribed(int ranks_on_host) {
  return ranks_on_host < 1 || ranks_on_host > host_cores();
}

}  // namespace lockstep::detail
