#include "store/store_semantics.h"

#include <charconv>

namespace lockstep::store_detail {

int64_t parse_counter(const std::string& key, std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    constexpr size_t kShown = 40;
    throw StoreError(detail::concat(
        "add() on key '", key, "' failed: it holds \"", text.substr(0, kShown),
        text.size() > kShown ? "..." : "",
        "\", which is not a decimal integer. Use a separate key for counters, or set() it to a "
        "number first."));
  }
  return value;
}

int64_t checked_sum(const std::string& key, int64_t current, int64_t delta) {
  int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result))
    throw StoreError(detail::concat("add() on key '", key, "' overflows: it holds ", current,
                                    " and delta is ", delta,
                                    "; counters are 64-bit signed integers"));
  return result;
}

std::string quote_keys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += "'" + keys[i] + "'";
  }
  if (keys.size() > kShown) out += detail::concat(" and ", keys.size() - kShown, " more");
  return out;
}

void check_multi_set_sizes(size_t keys, size_t values, const char* store_kind) {
  LOCKSTEP_ENFORCE(keys == values, InvalidArgument, store_kind, "::multi_set got ", keys,
                   " keys but ", values, " values; pass exactly one value per key");
}

std::string timeout_message(std::string_view op, const std::vector<std::string>& missing,
                            std::chrono::milliseconds timeout, std::string_view where) {
  return detail::concat(
      "store ", op, " timed out after ", timeout.count(), " ms waiting for key(s) ",
      quote_keys(missing), " (store: ", where, ")",
      ". The rank that should set them may have failed or not started yet: check the other "
      "ranks' output, or raise the timeout (LOCKSTEP_TIMEOUT).");
}

}  // namespace lockstep::store_detail
