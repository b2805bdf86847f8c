// Small helpers for the store tests: elapsed time, exception text, substring checks, a raw TCP
// client for poking the TcpStore server with bytes a real client would never send.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>

#include "lockstep/core/deadline.h"
#include "net/socket.h"
#include "support/messages.h"

namespace lockstep::store_test {

inline long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

using lockstep::testing::message_of;

#define EXPECT_NOT_CONTAINS(text, part)                                \
  EXPECT_EQ(std::string_view(text).find(part), std::string_view::npos) \
      << "did not expect \"" << (part) << "\" in:\n  " << (text)

// A plain blocking TCP connection to 127.0.0.1:port.
// `v` as `bytes` little-endian bytes: the wire's integers (src/store/protocol.h).
inline std::string le(uint64_t v, size_t bytes) {
  std::string out;
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

net::Fd raw_connect(uint16_t port);
void raw_send(int fd, std::string_view bytes);
// Reads exactly n bytes (NetworkError on close, TimeoutError after 5 s).
std::string raw_read(int fd, size_t n);
// Waits up to `within` for the peer to close fd; true when it did (EOF or reset), after
// discarding whatever bytes arrive first. Stores the count of those bytes in *bytes_seen.
bool closed_by_peer(int fd, milliseconds within, size_t* bytes_seen = nullptr);

}  // namespace lockstep::store_test
