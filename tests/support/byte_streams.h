// Helpers of the p2p channel tests (tests/backends/tcp/mesh_channel_test.cc): a group config, the
// bytes of a test stream, and one rank's loop that streams to and from every peer at once,
// checking every byte it receives.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/group_config.h"
#include "p2p/channel.h"

namespace lockstep::p2p::testing {

inline GroupConfig config_for(std::shared_ptr<Store> store, const std::string& name, int rank,
                              int size) {
  GroupConfig c;
  c.name = name;
  c.rank = rank;
  c.size = size;
  for (int r = 0; r < size; ++r) c.global_ranks.push_back(r);
  c.store = std::move(store);
  c.advertise_address = "127.0.0.1";
  c.timeout = std::chrono::seconds(10);
  return c;
}

// Byte i of the stream from src to dst: a hash of (src, dst, i / 8), so that a lost, repeated or
// reordered chunk shows.
inline uint8_t pattern(int src, int dst, uint64_t i) {
  uint64_t x = (i >> 3) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(src * 4096 + dst + 1);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x >> ((i & 7) * 8));
}

// One rank's loop: sends bytes_of(me, p) bytes to every rank p and receives bytes_of(p, me) from
// each, all at once in random chunks (1 byte to 256 KiB), checking every byte in order; then
// closes and waits until every peer that sent something is reported closed. Within 30 s.
inline void pump(Channel& ch, int me, int size, const std::function<uint64_t(int, int)>& bytes_of,
                 unsigned seed) {
  constexpr size_t kMaxChunk = 256 << 10;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> chunk(1, kMaxChunk);
  std::vector<uint64_t> sent(static_cast<size_t>(size)), got(static_cast<size_t>(size));
  std::vector<std::byte> out(kMaxChunk), in(kMaxChunk);
  auto deadline = Deadline::after(std::chrono::seconds(30));
  for (bool done = false; !done;) {
    ASSERT_FALSE(deadline.expired()) << "rank " << me << " timed out";
    ch.service();
    done = true;
    bool progress = false;
    std::vector<int> want_room;
    for (int p = 0; p < size; ++p) {
      uint64_t& s = sent[static_cast<size_t>(p)];
      uint64_t total = bytes_of(me, p);
      if (s == total) continue;
      done = false;
      size_t n = std::min<uint64_t>(chunk(rng), total - s);
      for (size_t i = 0; i < n; ++i) out[i] = std::byte(pattern(me, p, s + i));
      size_t w = ch.write(p, out.data(), n, deadline);
      s += w;
      if (w == 0) want_room.push_back(p);
      progress |= w > 0;
    }
    for (int p = 0; p < size; ++p) {
      uint64_t& g = got[static_cast<size_t>(p)];
      uint64_t total = bytes_of(p, me);
      if (g == total) continue;
      done = false;
      size_t r = ch.read(p, in.data(), std::min<uint64_t>(chunk(rng), total - g));
      for (size_t i = 0; i < r; ++i)
        ASSERT_EQ(static_cast<uint8_t>(in[i]), pattern(p, me, g + i))
            << "stream " << p << " -> " << me << ", byte " << g + i;
      g += r;
      progress |= r > 0;
      if (r == 0) {
        ASSERT_EQ(ch.broken(p), "") << "stream " << p << " -> " << me;
      }
    }
    if (!progress && !done) ch.sleep(Clock::now() + std::chrono::milliseconds(50), want_room);
  }
  ch.close();
  for (int p = 0; p < size; ++p) {
    if (bytes_of(p, me) == 0) continue;
    std::string why;
    while ((why = ch.broken(p)).empty() && !deadline.expired()) {
      ch.service();
      std::byte extra{};
      ASSERT_EQ(ch.read(p, &extra, 1), 0u) << "rank " << p << " sent more than its stream";
      if (ch.broken(p).empty()) ch.sleep(Clock::now() + std::chrono::milliseconds(20), {});
    }
    EXPECT_EQ(why, "rank " + std::to_string(p) + " closed its end of the stream") << "rank " << me;
  }
}

}  // namespace lockstep::p2p::testing
