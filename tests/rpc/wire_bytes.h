// Bytes of the rpc wire written out by hand, for the codec and frame tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

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

}  // namespace lockstep::rpc
