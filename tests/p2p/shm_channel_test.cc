// ShmChannel: ranks as threads over one HashStore, and a real child process over a TcpStore.
// Streams arrive intact (compared byte for byte, and by checksum) across many wraparounds with
// random chunk sizes (also with two threads per rank, sleep() beside write and read, as under the
// engine) and in a 64 MiB stream through a small ring; a full ring takes nothing and
// frees up as the reader reads; peek() and consume() take chunks as read() would; a corrupt
// chunk is a NetworkError naming its writer; sleep() ends promptly on data, wake() and room (the
// median delay is far below the 100 ms cap, which a lost wake-up would show) and keeps to `until`;
// broken() after close and after the child is SIGKILLed (only once its last bytes are read);
// nothing is left in /dev/shm.
#include "p2p/shm_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "support/child_mode.h"
#include "support/spawn.h"
#include "support/subprocess.h"
#include "support/wait_for.h"

namespace lockstep::p2p {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::byte>;

constexpr const char* kPortVariable = "LOCKSTEP_SHM_CHANNEL_TEST_PORT";
constexpr std::string_view kLastWords = "written just before the SIGKILL";

GroupConfig config(std::shared_ptr<Store> store, int rank, int size, std::string name = "g") {
  return {.name = std::move(name),
          .rank = rank,
          .size = size,
          .store = std::move(store),
          .timeout = 10s};
}

// ranks 0..size-1 as channels of one process, over one HashStore.
std::vector<std::unique_ptr<ShmChannel>> channels(int size, size_t ring_bytes) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::unique_ptr<ShmChannel>> v;
  for (int r = 0; r < size; ++r)
    v.push_back(std::make_unique<ShmChannel>(config(store, r, size), ring_bytes));
  return v;
}

// splitmix64 bytes: cheap enough for 64 MiB.
Bytes random_bytes(size_t n, uint64_t seed) {
  Bytes b(n);
  uint64_t x = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(b.data() + i, &z, std::min<size_t>(8, n - i));
  }
  return b;
}

// FNV-1a over 8-byte words (the tail zero-padded), with the length.
uint64_t checksum(const Bytes& b) {
  uint64_t h = 1469598103934665603ull ^ b.size();
  for (size_t i = 0; i < b.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, b.data() + i, std::min<size_t>(8, b.size() - i));
    h = (h ^ w) * 1099511628211ull;
  }
  return h;
}

// /dev/shm entries of inboxes made by process `pid`.
std::vector<std::string> inboxes_of(int pid) {
  std::vector<std::string> found;
  const std::string prefix = "lockstep-p2p-" + std::to_string(pid) + "-";
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(dir))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) found.push_back(e->d_name);
    ::closedir(dir);
  }
  return found;
}

// One rank's streams: send[p] goes to peer p; recv[p] is filled from p (sized to what p sends).
struct Streams {
  explicit Streams(size_t n = 2) { resize(n); }
  void resize(size_t n) { send.resize(n), recv.resize(n), sent.resize(n), got.resize(n); }
  std::vector<Bytes> send, recv;
  std::vector<size_t> sent, got;
  std::mutex engine;  // as the engine's lock: held for write, read and broken, not for sleep
  bool done = false;
};

// Drives one rank, from one thread or several: chunks of random size, sleeping whenever nothing
// moved. The thread that finishes wakes the others.
void pump(ShmChannel& ch, int me, Streams& s, size_t max_chunk, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> chunk(1, max_chunk);
  const auto deadline = Clock::now() + 30s;
  for (;;) {
    bool moved = false, done = true;
    std::vector<int> want_room;
    {
      std::lock_guard lock(s.engine);
      if (s.done) return;
      for (size_t p = 0; p < s.send.size(); ++p) {
        if (static_cast<int>(p) == me) continue;
        if (size_t left = s.send[p].size() - s.sent[p]) {
          size_t k = ch.write(static_cast<int>(p), s.send[p].data() + s.sent[p],
                              std::min(left, chunk(rng)), Deadline(deadline));
          s.sent[p] += k;
          moved |= k > 0;
          if (k == 0) want_room.push_back(static_cast<int>(p));
        }
        if (size_t left = s.recv[p].size() - s.got[p]) {
          size_t k =
              ch.read(static_cast<int>(p), s.recv[p].data() + s.got[p], std::min(left, chunk(rng)));
          s.got[p] += k;
          moved |= k > 0;
        }
        done = done && s.sent[p] == s.send[p].size() && s.got[p] == s.recv[p].size();
        EXPECT_EQ(ch.broken(static_cast<int>(p)), "");
      }
      if (done) {
        s.done = true;
        ch.wake();
        return;
      }
    }
    if (Clock::now() > deadline) throw TimeoutError("pump: rank " + std::to_string(me) + " stuck");
    if (!moved) ch.sleep(std::min(deadline, Clock::now() + 1s), want_room);
  }
}

// Every rank sends `bytes` random bytes to every other.
std::vector<Streams> all_to_all(int ranks, size_t bytes) {
  std::vector<Streams> v(static_cast<size_t>(ranks));
  for (size_t r = 0; r < v.size(); ++r) {
    v[r].resize(v.size());
    for (size_t p = 0; p < v.size(); ++p)
      if (p != r) {
        v[r].send[p] = random_bytes(bytes, r * 10 + p);
        v[r].recv[p].resize(bytes);
      }
  }
  return v;
}

void expect_delivered(const std::vector<Streams>& v) {
  for (size_t r = 0; r < v.size(); ++r)
    for (size_t p = 0; p < v.size(); ++p) {
      EXPECT_EQ(checksum(v[r].recv[p]), checksum(v[p].send[r])) << "stream " << p << " -> " << r;
      EXPECT_TRUE(v[r].recv[p] == v[p].send[r]) << "stream " << p << " -> " << r;
    }
}

TEST(ShmChannel, StreamsIntactAcrossManyWraparoundsWithRandomChunks) {
  auto ch = channels(3, 4096);
  auto streams = all_to_all(3, (size_t{2} << 20) + 12345);  // ~500 wraparounds of each ring
  testing::spawn(3, [&](int r) {
    pump(*ch[static_cast<size_t>(r)], r, streams[static_cast<size_t>(r)], 6000,
         static_cast<uint64_t>(r));
  });
  expect_delivered(streams);
}

// As under the engine: two threads per rank share its channel; write, read and broken under the
// rank's lock, sleep() outside it, concurrently with them.
TEST(ShmChannel, TwoThreadsPerRankDriveOneChannelLikeTheEngine) {
  auto ch = channels(3, 4096);
  auto streams = all_to_all(3, size_t{1} << 20);
  testing::spawn(6, [&](int t) {
    const size_t r = static_cast<size_t>(t / 2);
    pump(*ch[r], t / 2, streams[r], 3000, static_cast<uint64_t>(t));
  });
  expect_delivered(streams);
}

TEST(ShmChannel, SixtyFourMiBThroughASmallRingArriveIntact) {
  auto ch = channels(2, 64 << 10);
  std::vector<Streams> s(2);
  s[0].send[1] = random_bytes(64 << 20, 7);
  s[1].recv[0].resize(s[0].send[1].size());
  testing::spawn(2, [&](int r) {
    pump(*ch[static_cast<size_t>(r)], r, s[static_cast<size_t>(r)], 200'000,
         static_cast<uint64_t>(r));
  });
  expect_delivered(s);
}

TEST(ShmChannel, FullRingTakesNothingAndFreesUpAsTheReaderReads) {
  auto ch = channels(2, 4096);
  const Bytes data = random_bytes(10'000, 3);
  const Deadline soon = Deadline::after(5s);
  // One chunk fills the empty ring: all of it but the chunk's header.
  size_t sent = ch[0]->write(1, data.data(), data.size(), soon);
  EXPECT_EQ(sent, 4096u - sizeof(inbox::ChunkHeader));
  EXPECT_EQ(ch[0]->write(1, data.data() + sent, 100, soon), 0u) << "the ring is full";
  Bytes got(data.size());
  size_t received = ch[1]->read(0, got.data(), 1000);
  EXPECT_EQ(received, 1000u);
  // The read freed the chunk's header and 1000 bytes; a new chunk takes whole lines of it.
  const size_t more = ch[0]->write(1, data.data() + sent, 5000, soon);
  EXPECT_EQ(more, 1000u / inbox::kChunkAlign * inbox::kChunkAlign - sizeof(inbox::ChunkHeader));
  sent += more;
  EXPECT_EQ(ch[0]->write(1, data.data() + sent, 100, soon), 0u) << "full again";
  for (int round = 0; received < data.size() && round < 1000; ++round) {
    const size_t n = ch[1]->read(0, got.data() + received, data.size() - received);
    EXPECT_GT(n, 0u) << "round " << round << ": a full ring has bytes to read";
    received += n;
    if (sent < data.size()) sent += ch[0]->write(1, data.data() + sent, data.size() - sent, soon);
  }
  EXPECT_EQ(received, data.size());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(ch[1]->read(0, got.data(), 1), 0u);
}

TEST(ShmChannel, PeekLendsTheNextChunkAndConsumeTakesItLikeARead) {
  auto ch = channels(2, 4096);
  const Bytes data = random_bytes(300, 4);
  const Deadline soon = Deadline::after(5s);
  EXPECT_TRUE(ch[1]->peek(0).empty()) << "nothing written yet";
  ASSERT_EQ(ch[0]->write(1, data.data(), 100, soon), 100u);
  ASSERT_EQ(ch[0]->write(1, data.data() + 100, 200, soon), 200u);
  auto first = ch[1]->peek(0);
  ASSERT_EQ(first.size(), 100u) << "one chunk at a time";
  EXPECT_TRUE(std::equal(first.begin(), first.end(), data.begin()));
  ch[1]->consume(0, 40);
  auto rest = ch[1]->peek(0);
  ASSERT_EQ(rest.size(), 60u);
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), data.begin() + 40));
  ch[1]->consume(0, 60);
  Bytes got(200);
  EXPECT_EQ(ch[1]->read(0, got.data(), got.size()), 200u) << "read goes on where consume ended";
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + 100));
  EXPECT_TRUE(ch[1]->peek(0).empty());
  EXPECT_FALSE(ch[1]->maybe_unread());
  EXPECT_THROW(ch[1]->consume(0, 1), InvalidArgument) << "past what peek showed";
}

TEST(ShmChannel, ACorruptChunkIsANetworkErrorNamingTheWriter) {
  auto ch = channels(2, 4096);
  // Rank 1's inbox as rank 0's process sees it: a chunk whose length runs past the ring's end.
  const int fd = ::shm_open(ch[1]->inbox_name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  void* base =
      ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(base, MAP_FAILED);
  const auto* header = static_cast<const inbox::Header*>(base);
  auto* chunk = reinterpret_cast<inbox::ChunkHeader*>(
      static_cast<std::byte*>(base) + header->data_offset + inbox::slot(0, 1) * header->capacity);
  chunk->bytes = uint64_t{1} << 40;
  __atomic_store_n(&chunk->stamp, inbox::chunk_stamp(0, header->stamp_key), __ATOMIC_RELEASE);
  EXPECT_TRUE(ch[1]->maybe_unread());
  std::byte b[16];
  try {
    ch[1]->read(0, b, sizeof b);
    ADD_FAILURE() << "a corrupt chunk was read";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string_view(e.what()).find("rank 0 wrote a chunk of 1099511627776 bytes"),
              std::string_view::npos)
        << e.what();
    EXPECT_NE(std::string_view(e.what()).find("corrupt"), std::string_view::npos) << e.what();
  }
  ::munmap(base, static_cast<size_t>(st.st_size));
}

// The median time from trigger() to the return of a sleep() on `sleeper` that it should end.
// A lost wake-up would leave the sleep to its 100 ms cap.
template <class Prepare, class Trigger>
Clock::duration median_wake_delay(ShmChannel& sleeper, std::vector<int> want_room, Prepare prepare,
                                  Trigger trigger) {
  std::vector<Clock::duration> delays;
  for (int round = 0; round < 9; ++round) {
    prepare();
    Clock::time_point returned;
    std::thread t([&] {
      sleeper.sleep(Clock::now() + 5s, want_room);
      returned = Clock::now();
    });
    std::this_thread::sleep_for(15ms);
    const auto triggered = Clock::now();
    trigger();
    t.join();
    EXPECT_GT(returned, triggered) << "round " << round << ": the sleep returned early";
    delays.push_back(returned - triggered);
  }
  std::sort(delays.begin(), delays.end());
  return delays[delays.size() / 2];
}

TEST(ShmChannel, SleepEndsPromptlyOnDataWakeAndRoom) {
  auto ch = channels(2, 4096);
  std::byte buf[4096] = {};
  const Deadline soon = Deadline::after(10s);
  ch[0]->write(1, buf, 1, soon);  // connect both ways before timing
  ch[1]->write(0, buf, 1, soon);
  ch[0]->read(1, buf, 1);
  ch[1]->read(0, buf, 1);
  auto drain = [&] {
    while (ch[1]->read(0, buf, sizeof buf) > 0) continue;
  };
  auto fill = [&] {
    while (ch[0]->write(1, buf, sizeof buf, soon) > 0) continue;
  };
  auto send_4 = [&] { EXPECT_EQ(ch[0]->write(1, buf, 4, soon), 4u); };
  auto wake_1 = [&] { ch[1]->wake(); };
  auto read_64 = [&] { EXPECT_EQ(ch[1]->read(0, buf, 64), 64u); };
  EXPECT_LT(median_wake_delay(*ch[1], {}, drain, send_4), 50ms) << "on data";
  EXPECT_LT(median_wake_delay(*ch[1], {}, drain, wake_1), 50ms) << "on wake";
  EXPECT_LT(median_wake_delay(*ch[0], {1}, fill, read_64), 50ms) << "on room";
}

TEST(ShmChannel, ManySmallWritesAndReadsAlternateWithoutLoss) {
  auto ch = channels(2, 1 << 20);
  std::byte buf[4] = {};
  const Deadline soon = Deadline::after(10s);
  ch[0]->write(1, buf, 4, soon);  // connect
  ch[1]->read(0, buf, 4);
  constexpr int kRounds = 200'000;
  size_t moved = 0;
  for (int i = 0; i < kRounds; ++i) {
    buf[0] = static_cast<std::byte>(i);
    moved += ch[0]->write(1, buf, 4, soon);
    buf[0] = std::byte{0};
    moved += ch[1]->read(0, buf, 4);
    if (buf[0] != static_cast<std::byte>(i)) break;
  }
  // (Speed is the benchmark's business: lockstep bench --op pingpong.)
  EXPECT_EQ(moved, 8u * kRounds);
}

TEST(ShmChannel, SleepKeepsToUntilAndWakeBeforeSleepEndsTheNextOne) {
  auto ch = channels(2, 4096);
  auto slept = [&](Clock::duration d, std::vector<int> want = {}) {
    const auto start = Clock::now();
    ch[0]->sleep(start + d, want);
    return Clock::now() - start;
  };
  EXPECT_LT(slept(-1ms), 50ms);
  const auto short_sleep = slept(40ms);
  EXPECT_GE(short_sleep, 40ms);
  EXPECT_LT(short_sleep, 1s);  // generous: the machine may be loaded
  EXPECT_LT(slept(10s), 3s) << "sleeps are capped so that dead peers are noticed";
  ch[0]->wake();
  EXPECT_LT(slept(2s), 1s) << "a wake() before sleep() ends the next sleep";
  EXPECT_GE(slept(30ms), 30ms) << "and only that one";
  std::byte b{1};
  ch[1]->write(0, &b, 1, Deadline::after(5s));
  EXPECT_LT(slept(2s), 1s) << "unread data ends a sleep at once";
}

TEST(ShmChannel, BrokenAfterCloseOnceEverythingIsRead) {
  auto ch = channels(3, 4096);
  const Bytes bye = random_bytes(3000, 5);
  ASSERT_EQ(ch[0]->write(1, bye.data(), bye.size(), Deadline::after(5s)), bye.size());
  EXPECT_EQ(ch[1]->broken(0), "");
  ch[0]->close();
  EXPECT_EQ(ch[1]->broken(0), "") << "bytes are still unread";
  Bytes got(bye.size());
  EXPECT_EQ(ch[1]->read(0, got.data(), got.size()), got.size());
  EXPECT_TRUE(got == bye);
  EXPECT_EQ(ch[1]->broken(0), "rank 0 closed its end of the stream");
  EXPECT_EQ(ch[1]->broken(2), "") << "rank 2 is fine";
  ch[2]->close();  // never talked to rank 1
  EXPECT_EQ(ch[1]->broken(2), "rank 2 closed its end of the stream");
  ch[2].reset();  // and its inbox is gone
  EXPECT_EQ(ch[0]->broken(2), "rank 2 closed its end of the stream");
  EXPECT_THROW(ch[0]->write(2, bye.data(), 1, Deadline::after(1s)), NetworkError);
}

TEST(ShmChannel, FirstWriteToAnAbsentRankTimesOutNamingIt) {
  auto store = std::make_shared<HashStore>();
  ShmChannel ch(config(store, 0, 2));
  std::byte b{};
  const auto start = Clock::now();
  try {
    ch.write(1, &b, 1, Deadline::after(50ms));
    FAIL() << "no TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_THROW({ ShmChannel bad(config(store, 1, 2), 5000); }, InvalidArgument);
}

TEST(ShmChannel, InboxesLeaveNothingInDevShm) {
  const int pid = static_cast<int>(::getpid());
  {
    auto ch = channels(3, 4096);
    EXPECT_EQ(inboxes_of(pid).size(), 3u) << "no peer has mapped any inbox yet";
    std::byte b{};
    // Every peer of rank 0 maps its inbox: its name goes at once.
    ch[1]->write(0, &b, 1, Deadline::after(5s));
    ch[2]->write(0, &b, 1, Deadline::after(5s));
    auto left = inboxes_of(pid);
    EXPECT_EQ(left.size(), 2u);
    EXPECT_EQ(std::count(left.begin(), left.end(), ch[0]->inbox_name().substr(1)), 0);
  }
  EXPECT_TRUE(inboxes_of(pid).empty());
}

// ---- a real child process (rank 1): echoes what rank 0 sends, then waits to be killed ----

TEST(ShmChannelChild, DISABLED_Echo) {
  const char* port = std::getenv(kPortVariable);
  if (!port) GTEST_SKIP() << "child mode only";
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{
      .host = "127.0.0.1", .port = static_cast<uint16_t>(std::atoi(port)), .timeout = 30s});
  ShmChannel ch(config(store, 1, 2, "echo"), 4096);
  Streams in, out;
  in.recv[0].resize(std::stoul(store->get("echo/bytes")));
  pump(ch, 1, in, 7000, 11);  // take it all, then send it back
  out.send[0] = std::move(in.recv[0]);
  pump(ch, 1, out, 7000, 12);
  // The parent may still be taking the echo's last chunks: the ring has room once it has.
  auto last = reinterpret_cast<const std::byte*>(kLastWords.data());
  size_t written = 0;
  const auto give_up = Clock::now() + 10s;
  while (written < kLastWords.size() && Clock::now() < give_up) {
    written += ch.write(0, last + written, kLastWords.size() - written, Deadline::after(1s));
    if (written < kLastWords.size()) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(written, kLastWords.size());
  store->set("echo/done", "1");
  std::this_thread::sleep_for(60s);
}

TEST(ShmChannel, ChildProcessEchoesAndIsSeenDyingWhenKilled) {
  TcpStoreServer server({.bind_host = "127.0.0.1"});
  auto store = std::make_shared<TcpStore>(
      TcpStoreOptions{.host = "127.0.0.1", .port = server.port(), .timeout = 30s});
  const Bytes data = random_bytes(1 << 20, 9);
  store->set("echo/bytes", std::to_string(data.size()));
  testing::Child child(testing::child_argv("ShmChannelChild.DISABLED_Echo"),
                       {{kPortVariable, std::to_string(server.port())}});
  const int child_pid = child.pid();
  {
    ShmChannel ch(config(store, 0, 2, "echo"), 4096);
    Streams out, in;
    out.send[1] = data;
    pump(ch, 0, out, 5000, 13);
    in.recv[1].resize(data.size());
    pump(ch, 0, in, 5000, 14);
    EXPECT_EQ(checksum(in.recv[1]), checksum(data));
    EXPECT_TRUE(in.recv[1] == data);
    store->wait({"echo/done"}, 10s);
    child.kill(SIGKILL);
    const auto killed = Clock::now();
    auto result = child.wait(5s);  // reaped: it is gone
    EXPECT_EQ(result.signal, SIGKILL) << result.output;
    EXPECT_EQ(ch.broken(1), "") << "its last words are still unread";
    std::string last(kLastWords.size(), '\0');
    EXPECT_EQ(ch.read(1, reinterpret_cast<std::byte*>(last.data()), last.size()), last.size());
    EXPECT_EQ(last, kLastWords);
    std::string why;
    EXPECT_TRUE(testing::wait_until([&] { return !(why = ch.broken(1)).empty(); }, 2s));
    EXPECT_LT(Clock::now() - killed, 1s);
    EXPECT_EQ(why,
              "rank 1 (pid " + std::to_string(child_pid) + " on " + net::hostname() + ") died");
  }
  EXPECT_TRUE(inboxes_of(child_pid).empty());
  EXPECT_TRUE(inboxes_of(static_cast<int>(::getpid())).empty());
}

}  // namespace
}  // namespace lockstep::p2p
