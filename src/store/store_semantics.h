// The exact semantics of the Store operations on a plain key-value map, shared by HashStore,
// FileStore and the TcpStore server so that every store agrees on what add(), compare_set() and
// the blocking calls mean. Each owner wraps these in its own locking and waiting.
//
// Thread-safety: none; the caller serialises access to the map.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::store_detail {

// Parses a counter value written by add(); StoreError naming key when it is not decimal text.
int64_t parse_counter(const std::string& key, std::string_view text);
// current + delta, or StoreError naming key on overflow.
int64_t checked_sum(const std::string& key, int64_t current, int64_t delta);

// Adds delta to the decimal integer at key (missing: 0), stores it as decimal text and returns it.
template <class Map>
int64_t add_counter(Map& map, const std::string& key, int64_t delta) {
  auto it = map.find(key);
  int64_t current = it == map.end() ? 0 : parse_counter(key, it->second);
  int64_t result = checked_sum(key, current, delta);
  map.insert_or_assign(key, std::to_string(result));
  return result;
}

// Store::compare_set on map. Sets *changed when it wrote the key.
template <class Map>
std::string compare_set_in(Map& map, const std::string& key, std::string_view expected,
                           std::string_view desired, bool* changed) {
  auto it = map.find(key);
  std::string_view current = it == map.end() ? std::string_view() : std::string_view(it->second);
  *changed = current == expected;
  if (!*changed) return std::string(current);
  map.insert_or_assign(key, std::string(desired));
  return std::string(desired);
}

// The keys among `keys` missing from map, in order.
template <class Map>
std::vector<std::string> missing_keys(const Map& map, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (map.find(k) == map.end()) out.push_back(k);
  return out;
}

// The values of keys, which must all be present.
template <class Map>
std::vector<std::string> values_of(const Map& map, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(map.find(k)->second);
  return out;
}

// "'a', 'b', 'c'" (the first few keys, then "and N more"), for error messages.
std::string quote_keys(const std::vector<std::string>& keys);

// InvalidArgument unless there is one value per key.
void check_multi_set_sizes(size_t keys, size_t values, const char* store_kind);

// The message of the TimeoutError of `op` that waited `timeout` at `where` for `missing`.
std::string timeout_message(std::string_view op, const std::vector<std::string>& missing,
                            std::chrono::milliseconds timeout, std::string_view where);

}  // namespace lockstep::store_detail
