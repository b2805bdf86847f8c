// Helpers shared by the harnesses: cutting one fuzz input into the pieces a parser takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The pieces of text between separator bytes (a trailing separator ends the last piece).
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    pieces.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return pieces;
}

// How many bytes each read of a stream gets, from one input byte: 1 to 64, or 0 for "all at
// once", so that a parser sees its input cut at every place a socket could cut it.
inline size_t read_size(uint8_t choice) {
  return choice < 64 ? choice + 1 : 0;
}

// A property a harness checks failed: report it the way a sanitizer would (abort, which libFuzzer
// records as a crash with its input).
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz: property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace lockstep::fuzz
