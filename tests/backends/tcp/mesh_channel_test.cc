// MeshChannel: the p2p stream on the tcp mesh's own connections, as the p2p engine drives it.
// Ranks are threads of this process over one real loopback mesh; each rank's collectives run on
// one thread (the transport's) while its p2p stream runs on another (as the engine's), so both
// sides of every connection read and write the same socket at once. Every byte of every stream,
// and every element of every collective result, is checked against its closed form.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "algorithms/algorithms.h"
#include "backends/tcp/mesh_channel.h"
#include "backends/tcp/tcp_transport.h"
#include "lockstep/store/hash_store.h"
#include "support/byte_streams.h"
#include "support/loopback_mesh.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using p2p::testing::config_for;
using p2p::testing::pattern;
using p2p::testing::pump;
using namespace std::chrono_literals;

struct MeshRankParts {
  std::unique_ptr<tcp::TcpTransport> transport;
  std::unique_ptr<tcp::MeshChannel> channel;
};

// Runs fn(rank, transport, channel) on `size` threads over one mesh; the transport says goodbye
// after fn (the channel is closed by then, as a group closes its p2p engine first).
void with_mesh_channel(int size,
                       const std::function<void(int, tcp::TcpTransport&, tcp::MeshChannel&)>& fn) {
  static std::atomic<int> meshes{0};
  const std::string group = "meshchan" + std::to_string(meshes++);
  auto store = std::make_shared<HashStore>();
  spawn(size, [&](int rank) {
    auto transport_ptr = connect_loopback_mesh(group, rank, size, store);
    tcp::TcpTransport& transport = *transport_ptr;
    tcp::MeshChannel channel(transport.links(), config_for(store, group, rank, size));
    fn(rank, transport, channel);
    channel.close();
    transport.goodbye(Deadline::after(10s));
  });
}

// Rank r's all_reduce input element i, and the sum over n ranks.
float value(int r, size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>(i % 13));
}
float sum_of(int n, size_t i) {
  return static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 13));
}

// `rounds` all_reduces of `count` floats on the transport, each checked against its closed form.
void all_reduces(tcp::TcpTransport& t, int rank, int size, size_t count, int rounds) {
  Scratch scratch;
  std::vector<float> x(count);
  for (int k = 0; k < rounds; ++k) {
    for (size_t i = 0; i < count; ++i) x[i] = value(rank, i);
    Op op;
    op.kind = OpKind::all_reduce;
    op.seq = static_cast<uint64_t>(k + 1);
    op.dtype = DType::f32;
    op.count = count;
    op.input = op.output = x.data();
    op.deadline = Deadline::after(60s);
    t.begin_op(op);
    run_collective(t, scratch, op);
    t.finish_op();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(x[i], sum_of(size, i)) << "rank " << rank << ", round " << k << ", element " << i;
  }
}

TEST(MeshChannel, StreamsAreIntactBothWaysAtWorld2) {
  with_mesh_channel(2, [](int rank, tcp::TcpTransport&, tcp::MeshChannel& ch) {
    pump(
        ch, rank, 2, [](int s, int d) -> uint64_t { return s == d ? 0 : 3 << 20; }, 7u + rank);
  });
}

TEST(MeshChannel, StreamsAreIntactAllToAllAtWorld4) {
  with_mesh_channel(4, [](int rank, tcp::TcpTransport&, tcp::MeshChannel& ch) {
    pump(
        ch, rank, 4, [](int s, int d) -> uint64_t { return s == d ? 0 : (s + 1) * 200'000u + d; },
        11u + rank);
  });
}

TEST(MeshChannel, A64MiBStreamArrivesIntact) {
  with_mesh_channel(2, [](int rank, tcp::TcpTransport&, tcp::MeshChannel& ch) {
    pump(
        ch, rank, 2, [](int s, int d) -> uint64_t { return s == 0 && d == 1 ? 64u << 20 : 0; }, 3u);
  });
}

// The heart of sharing one socket: collectives and the p2p stream at once, on two threads, in
// both directions of every connection, small and large. Neither reads the other's bytes.
TEST(MeshChannel, CollectivesAndTheStreamShareEveryConnectionIntact) {
  for (size_t count : {size_t{16}, size_t{300'000}}) {
    with_mesh_channel(3, [&](int rank, tcp::TcpTransport& t, tcp::MeshChannel& ch) {
      std::thread p2p([&] {
        pump(
            ch, rank, 3, [](int s, int d) -> uint64_t { return s == d ? 0 : 5u << 20; },
            17u + rank);
      });
      all_reduces(t, rank, 3, count, count < 1000 ? 200 : 12);
      p2p.join();
    });
  }
}

// Rank 0 broadcasts 2 MiB, then streams; rank 1 takes the whole stream before it enters the
// broadcast. The broadcast's frame comes first on the socket, so rank 1's p2p side must read
// past it (keeping it for the collectives: the broadcast completes on rank 0 only once rank 1
// took its bytes off the socket, as a socket buffer would) to the stream behind, and the
// broadcast that rank 1 runs afterwards still gets every element.
TEST(MeshChannel, TheStreamGoesPastACollectiveFrameNotYetRead) {
  with_mesh_channel(2, [](int rank, tcp::TcpTransport& t, tcp::MeshChannel& ch) {
    constexpr uint64_t kStream = 1 << 20;
    constexpr size_t kCount = 512 * 1024;
    const auto stream = [](int s, int d) -> uint64_t { return s == 0 && d == 1 ? kStream : 0; };
    std::vector<float> x(kCount);
    for (size_t i = 0; i < kCount; ++i) x[i] = rank == 0 ? value(0, i) : -1.0f;
    Scratch scratch;
    Op op;
    op.kind = OpKind::broadcast;
    op.seq = 1;
    op.root = 0;
    op.dtype = DType::f32;
    op.count = kCount;
    op.input = op.output = x.data();
    op.deadline = Deadline::after(60s);
    const auto broadcast = [&] {
      t.begin_op(op);
      run_collective(t, scratch, op);
      t.finish_op();
    };
    if (rank == 0) {
      broadcast();
      pump(ch, 0, 2, stream, 5u);
    } else {
      pump(ch, 1, 2, stream, 5u);
      broadcast();
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(x[i], value(0, i)) << "element " << i;
    }
  });
}

TEST(MeshChannel, SleepReturnsOnBytesAndOnWakeAndKeepsToUntil) {
  with_mesh_channel(2, [](int rank, tcp::TcpTransport& t, tcp::MeshChannel& ch) {
    std::byte b{};
    if (rank == 0) {
      // Nothing comes: sleep keeps to its deadline.
      auto start = Clock::now();
      ch.sleep(Clock::now() + 150ms, {});
      EXPECT_GE(Clock::now() - start, 140ms);
      // wake() from another thread ends it early.
      std::thread waker([&] {
        std::this_thread::sleep_for(50ms);
        ch.wake();
      });
      start = Clock::now();
      ch.sleep(Clock::now() + 5s, {});
      EXPECT_LT(Clock::now() - start, 2s);
      waker.join();
      // Rank 1 writes one byte: a sleep ends for it, and read() takes it.
      start = Clock::now();
      while (ch.read(1, &b, 1) == 0) {
        ASSERT_LT(Clock::now() - start, 5s);
        ch.service();
        ch.sleep(Clock::now() + 1s, {});
      }
      EXPECT_EQ(b, std::byte{42});
    } else {
      std::this_thread::sleep_for(400ms);
      std::byte v{42};
      ASSERT_EQ(ch.write(0, &v, 1, Deadline::after(5s)), 1u);
    }
    // Meet once more on the collectives, so that nobody closes first.
    all_reduces(t, rank, 2, 4, 1);
  });
}

TEST(MeshChannel, BrokenAfterCloseComesAfterEveryByteAndNamesTheOrderlyEnd) {
  with_mesh_channel(2, [](int rank, tcp::TcpTransport& t, tcp::MeshChannel& ch) {
    if (rank == 0) {
      std::vector<std::byte> data(100'000);
      for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(pattern(0, 1, i));
      size_t sent = 0;
      while (sent < data.size()) {
        size_t n = ch.write(1, data.data() + sent, data.size() - sent, Deadline::after(5s));
        sent += n;
        if (n == 0) ch.sleep(Clock::now() + 50ms, std::vector<int>{1});
      }
      ch.close();
      all_reduces(t, 0, 2, 4, 1);
      return;
    }
    all_reduces(t, 1, 2, 4, 1);  // rank 0 has closed by now
    std::vector<std::byte> got;
    std::byte buf[4096];
    auto deadline = Deadline::after(10s);
    while (ch.broken(0).empty()) {
      ASSERT_FALSE(deadline.expired());
      ch.service();
      size_t n = ch.read(0, buf, sizeof buf);
      got.insert(got.end(), buf, buf + n);
      if (n == 0 && ch.broken(0).empty()) ch.sleep(Clock::now() + 20ms, {});
    }
    ASSERT_EQ(got.size(), 100'000u);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(static_cast<uint8_t>(got[i]), pattern(0, 1, i)) << "byte " << i;
    EXPECT_EQ(ch.broken(0), "rank 0 closed its end of the stream");
  });
}

}  // namespace
}  // namespace lockstep::testing
