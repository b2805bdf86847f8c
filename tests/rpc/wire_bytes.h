// Bytes of the rpc wire written out by hand, and blobs of known bytes, for the codec and frame
// tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "rpc/message.h"

#include "rpc/message.h"

namespace lockstep::rpc {

// Bytes written out one by one.
inline std::string raw(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}
// v's n low bytes, little-endian.
inline std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}
inline std::string le32(uint32_t v) {
  return le(v, 4);
}
inline std::string le64(uint64_t v) {
  return le(v, 8);
}

// Byte i of pattern_blob(n, seed).
inline unsigned char pattern_byte(size_t i, uint32_t seed) {
  return static_cast<unsigned char>((i * 2654435761u + seed) >> 7);
}
// A blob of n bytes of its own, each byte a function of its offset and `seed`.
inline Blob pattern_blob(size_t n, uint32_t seed = 0) {
  Blob b = allocate_blob(n);
  auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(b.data));
  for (size_t i = 0; i < n; ++i) p[i] = pattern_byte(i, seed);
  return b;
}

}  // namespace lockstep::rpc
