// The tcp backend with ranks as threads: junk connections during setup, goodbye semantics (a
// rank that finishes first is not mistaken for a dead one; a rank that leaves while others still
// need it is named), abort propagation, and the timeout message.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "backends/tcp/backend.h"
#include "backends/tcp/mesh.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "net/listener_record.h"
#include "net/socket.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "tcp_test_util.h"

namespace lockstep::testing {
namespace {

// Connects to rank 0's published port and sends what a confused client would.
void send_junk(Store& store, const std::string& group) {
  std::string record =
      store.get(net::listener_key(group, net::Service::mesh, 0), std::chrono::seconds(10));
  std::string hostport = record.substr(0, record.find('|'));
  auto port = static_cast<uint16_t>(std::stoi(hostport.substr(hostport.rfind(':') + 1)));
  Deadline d = Deadline::after(std::chrono::seconds(5));
  {  // HTTP
    net::Fd fd = net::connect_tcp("127.0.0.1", port, d, false);
    std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    net::write_full(fd.get(), http.data(), http.size(), d, "junk");
  }
  {  // a hello-sized blob of 0xff
    net::Fd fd = net::connect_tcp("127.0.0.1", port, d, false);
    std::string blob(32, '\xff');
    net::write_full(fd.get(), blob.data(), blob.size(), d, "junk");
  }
  { net::Fd fd = net::connect_tcp("127.0.0.1", port, d, false); }  // connects and closes
}

TEST(TcpThreads, JunkConnectionsDuringSetupAreDroppedAndTheGroupWorks) {
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> junk_sent{false};
  spawn(4, [&](int who) {
    if (who == 3) {
      send_junk(*store, "junk");
      junk_sent = true;
      return;
    }
    if (who > 0)  // the real peers connect after the junk
      while (!junk_sent) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto backend = tcp::make_tcp_backend(config_for("junk", who, 3, store));
    std::vector<float> x(1000, static_cast<float>(who + 1));
    backend->run(sum_op(0, x));
    for (float v : x) ASSERT_EQ(v, 6.0f);
    backend->shutdown(Deadline::after(std::chrono::seconds(5)));
  });
}

// Rank 0 leaves right after the first collective; ranks 1 and 2 keep exchanging for a while.
// Rank 0's goodbye must not read as a death to them.
TEST(TcpThreads, RankThatFinishesFirstIsNotMistakenForADeadRank) {
  auto store = std::make_shared<HashStore>();
  spawn(3, [&](int rank) {
    auto pg = init_process_group({.rank = rank,
                                  .world_size = 3,
                                  .store = store,
                                  .timeout = std::chrono::seconds(30),
                                  .group_name = "early"});
    std::vector<float> x(1000, 1.0f);
    pg->all_reduce(view(x))->wait();
    if (rank == 0) return;  // destroys the group: goodbye, linger
    const int peer = rank == 1 ? 2 : 1;
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (rank == 1)
        pg->send(view(x), peer)->wait();
      else
        pg->recv(view(x), peer)->wait();
    }
  });
}

TEST(TcpThreads, RankThatLeavesWhileOthersNeedItIsNamed) {
  auto store = std::make_shared<HashStore>();
  std::string error;
  spawn(2, [&](int rank) {
    auto pg = init_process_group({.rank = rank,
                                  .world_size = 2,
                                  .store = store,
                                  .timeout = std::chrono::seconds(30),
                                  .group_name = "leaver"});
    std::vector<float> x(1000, 1.0f);
    pg->all_reduce(view(x))->wait();
    if (rank == 0) return;  // skips the second all_reduce
    auto start = Clock::now();
    try {
      pg->all_reduce(view(x))->wait();
    } catch (const NetworkError& e) {
      error = e.what();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  });
  EXPECT_TRUE(contains(error, "rank 0 (host ")) << error;
  EXPECT_TRUE(contains(error, "shut down its process group while rank 1 waits in all_reduce #1"))
      << error;
}

TEST(TcpThreads, MismatchOnOneRankReachesAThirdRankAsAnAbort) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(3);
  spawn(3, [&](int rank) {
    auto backend = tcp::make_tcp_backend(config_for("abort", rank, 3, store));
    // A ring all_gather in which rank 0 contributes 64 elements and ranks 1 and 2 contribute 32:
    // rank 1 (which receives from rank 0) and rank 0 (which receives from rank 2) see the
    // difference; rank 2's messages come from rank 1 only, which stops forwarding, so rank 2 must
    // fail with their reason, not hang.
    try {
      const size_t count = rank == 0 ? 64 : 32;
      std::vector<float> x(count), y(count * 3);
      Op op;
      op.kind = OpKind::all_gather;
      op.count = count;
      op.counts.assign(3, count);
      op.input = x.data();
      op.output = y.data();
      op.deadline = Deadline::after(std::chrono::seconds(30));
      backend->run(op);
    } catch (const Error& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  });
  // Rank 1 reads rank 0's block first: its own finding. Rank 0 finds the difference in rank 2's
  // block, unless rank 1's abort reaches it first.
  EXPECT_TRUE(contains(errors[1], "rank 0 sent 256 bytes, rank 1 expected 128")) << errors[1];
  EXPECT_TRUE(contains(errors[0], "rank 2 sent 128 bytes, rank 0 expected 256") ||
              contains(errors[0], "rank 0 sent 256 bytes, rank 1 expected 128"))
      << errors[0];
  // Rank 2 watches every peer: it learns the root cause from whichever abort frame comes first.
  EXPECT_TRUE(contains(errors[2], " to rank 2 in all_gather #0)")) << errors[2];
  EXPECT_TRUE(contains(errors[2], "rank 2 sent 128 bytes, rank 0 expected 256") ||
              contains(errors[2], "rank 0 sent 256 bytes, rank 1 expected 128"))
      << errors[2];
}

// send and recv go through the group's p2p engine: a backend that does not fuse them refuses one
// that reaches its run(), and the refusal leaves the group usable (no abort reaches the peers).
TEST(TcpThreads, ASendReachingTheBackendIsRefusedAndTheGroupStaysUsable) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  spawn(2, [&](int rank) {
    auto backend = tcp::make_tcp_backend(config_for("refuse", rank, 2, store));
    std::vector<float> x(10, static_cast<float>(rank + 1));
    Op send;
    send.kind = rank == 0 ? OpKind::send : OpKind::recv;
    send.peer = 1 - rank;
    send.count = x.size();
    send.input = x.data();
    send.output = x.data();
    send.deadline = Deadline::after(std::chrono::seconds(30));
    try {
      backend->run(send);
    } catch (const InvalidArgument& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
    backend->run(sum_op(0, x));
    for (float v : x) ASSERT_EQ(v, 3.0f);
    backend->shutdown(Deadline::after(std::chrono::seconds(5)));
  });
  EXPECT_TRUE(contains(errors[0], "send #0 to rank 1: tcp runs collectives only")) << errors[0];
  EXPECT_TRUE(contains(errors[1], "recv #0 from rank 0: tcp runs collectives only")) << errors[1];
}

TEST(TcpThreads, TimeoutNamesThePeerStillOwingData) {
  auto store = std::make_shared<HashStore>();
  std::string error;
  spawn(2, [&](int rank) {
    auto backend = tcp::make_tcp_backend(config_for("late", rank, 2, store));
    std::vector<float> x(10, 1.0f);
    if (rank == 1) {  // enters only after rank 0 has given up
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    auto start = Clock::now();
    try {
      backend->run(sum_op(0, x, std::chrono::milliseconds(300)));
    } catch (const TimeoutError& e) {
      error = e.what();
    }
    auto took = Clock::now() - start;
    EXPECT_GE(took, std::chrono::milliseconds(290));
    EXPECT_LT(took, std::chrono::milliseconds(1400));
  });
  EXPECT_TRUE(contains(error, "all_reduce #0 (f32")) << error;
  EXPECT_TRUE(contains(error, "timed out on rank 0")) << error;
  EXPECT_TRUE(contains(error, "still waiting for data from rank 1 (host host1")) << error;
}

}  // namespace
}  // namespace lockstep::testing
