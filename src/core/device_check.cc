#include "core/device_check.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// "ranks 0 and 3", "ranks 0, 1 and 2".
std::string rank_list(const std::vector<const DeviceClaim*>& claims) {
  std::string out = "ranks ";
  for (size_t i = 0; i < claims.size(); ++i) {
    if (i > 0) out += i + 1 == claims.size() ? " and " : ", ";
    out += std::to_string(claims[i]->rank);
  }
  return out;
}

// "cuda:0" when every rank sees the device under one index, else "cuda:0 (rank 0), cuda:1 (rank
// 1)".
std::string device_list(const std::vector<const DeviceClaim*>& claims) {
  bool same_index = std::all_of(claims.begin(), claims.end(), [&](const DeviceClaim* c) {
    return c->device == claims[0]->device;
  });
  if (same_index) return "cuda:" + std::to_string(claims[0]->device);
  std::string out;
  for (const DeviceClaim* c : claims) {
    if (!out.empty()) out += ", ";
    out += detail::concat("cuda:", c->device, " (rank ", c->rank, ")");
  }
  return out;
}

}  // namespace

std::optional<std::string> duplicate_device_problem(std::span<const DeviceClaim> claims) {
  // (host_id, device_id) -> the claims on it, in rank order.
  std::map<std::pair<std::string, std::string>, std::vector<const DeviceClaim*>> by_device;
  for (const DeviceClaim& c : claims) by_device[{c.host_id, c.device_id}].push_back(&c);
  std::string problems;
  for (auto& [key, sharing] : by_device) {
    if (sharing.size() < 2) continue;
    std::sort(sharing.begin(), sharing.end(),
              [](const DeviceClaim* a, const DeviceClaim* b) { return a->rank < b->rank; });
    if (!problems.empty()) problems += "; ";
    problems += detail::concat(rank_list(sharing), " on host ", sharing[0]->host, " all use ",
                               device_list(sharing), " (one GPU, PCI ", key.second, ")");
  }
  if (problems.empty()) return std::nullopt;
  return detail::concat(
      "duplicate GPU: ", problems,
      ". Every rank on a host needs its own GPU. Fix: set the device from LOCAL_RANK before "
      "init, e.g. cudaSetDevice(local_rank) or torch::Device(torch::kCUDA, local_rank), and put "
      "the rank's buffers there (lockstep run sets LOCAL_RANK for each rank)");
}

void check_distinct_devices(std::span<const DeviceClaim> claims) {
  if (auto problem = duplicate_device_problem(claims)) throw ConfigError(*problem);
}

std::string encode_device_claim(const DeviceClaim& claim) {
  return detail::concat(claim.host_id, '\n', claim.host, '\n', claim.device, '\n', claim.device_id);
}

DeviceClaim decode_device_claim(int rank, std::string_view value) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (size_t nl; (nl = value.find('\n', start)) != std::string_view::npos; start = nl + 1)
    fields.push_back(value.substr(start, nl - start));
  fields.push_back(value.substr(start));
  int device = -1;
  bool ok = fields.size() == 4;
  if (ok) {
    auto [end, ec] = std::from_chars(fields[2].data(), fields[2].data() + fields[2].size(), device);
    ok = ec == std::errc() && end == fields[2].data() + fields[2].size() && device >= 0;
  }
  LOCKSTEP_ENFORCE(ok, StoreError, "rank ", rank, "'s device claim '", value,
                   "' is malformed (expected host id, host, device index and device id, one a "
                   "line); is every rank running the same lockstep version?");
  return DeviceClaim{.rank = rank,
                     .host_id = std::string(fields[0]),
                     .host = std::string(fields[1]),
                     .device = device,
                     .device_id = std::string(fields[3])};
}

}  // namespace lockstep
