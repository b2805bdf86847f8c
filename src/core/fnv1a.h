// FNV-1a, 64-bit: the one non-cryptographic hash of lockstep's wire formats (the group-name hash
// in hellos, the shm descriptor fingerprint, the collective fingerprints). Cheap and stable
// across builds and hosts; never for anything an attacker must not forge (src/net/auth.h is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lockstep {

inline uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 14695981039346656037ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a(std::string_view text) {
  return fnv1a(text.data(), text.size());
}

}  // namespace lockstep
