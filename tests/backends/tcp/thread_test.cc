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
#include "net/socket.h"
#include "support/spawn.h"
#include "support/messages.h"
#include "tcp_test_util.h"

namespace lockstep::testing {
namespace {

// Connects to rank 0's published port and sends what a confused client would.
void send_junk(Store& store, const std::string& group) {
  std::string record = store.get(tcp::mesh_address_key(group, 0), std::chrono::seconds(10));
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
    // Ranks 0 and 1 disagree about a message's size; rank 2 waits on a recv from rank 0
    // meanwhile and must fail with their reason, not hang.
    try {
      if (rank == 2) {
        std::vector<float> y(10);
        Op recv;
        recv.kind = OpKind::recv;
        recv.peer = 0;
        recv.count = 10;
        recv.output = y.data();
        recv.deadline = Deadline::after(std::chrono::seconds(30));
        backend->run(recv);
      } else {
        std::vector<float> x(rank == 0 ? 64 : 32);
        Op op;
        op.kind = OpKind::send;  // a 2-rank exchange through p2p: 0 <-> 1
        op.peer = 1 - rank;
        op.count = x.size();
        op.input = x.data();
        op.deadline = Deadline::after(std::chrono::seconds(30));
        backend->run(op);
        Op recv = op;
        recv.kind = OpKind::recv;
        recv.output = x.data();
        recv.count = 48;  // neither 64 nor 32
        backend->run(recv);
      }
    } catch (const Error& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  });
  EXPECT_TRUE(
      contains(errors[0], "recv #0 from rank 1: rank 1 sent 128 bytes, rank 0 expected 192"))
      << errors[0];
  EXPECT_TRUE(contains(errors[1], "rank 0 sent 256 bytes, rank 1 expected 192")) << errors[1];
  // Rank 2 watches every peer: it learns the root cause from whichever abort frame comes first.
  EXPECT_TRUE(contains(errors[2], " to rank 2 in recv #0 from rank 0)")) << errors[2];
  EXPECT_TRUE(contains(errors[2], "rank 1 sent 128 bytes, rank 0 expected 192") ||
              contains(errors[2], "rank 0 sent 256 bytes, rank 1 expected 192"))
      << errors[2];
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
