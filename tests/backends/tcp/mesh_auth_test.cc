// The tcp mesh with the job's secret (src/net/peer_auth.h), ranks as threads over real sockets:
// ranks that share the secret connect and reduce; a rank with another secret, or with none, gets
// an AuthError naming the rank that refused it, at once; an outsider that knows the wire format
// but not the secret is refused (it reads a verdict and nothing else) and the job goes on; and the
// listener binds the loopback address the group advertises.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "backends/tcp/backend.h"
#include "backends/tcp/mesh.h"
#include "core/fnv1a.h"
#include "lockstep/core/error.h"
#include "lockstep/store/hash_store.h"
#include "net/listener_record.h"
#include "net/peer_auth.h"
#include "net/socket.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "tcp_test_util.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

uint16_t published_port(Store& store, const std::string& group, int rank) {
  std::string record = store.get(net::listener_key(group, net::Service::mesh, rank), 10s);
  std::string hostport = record.substr(0, record.find('|'));
  return static_cast<uint16_t>(std::stoi(hostport.substr(hostport.rfind(':') + 1)));
}

TEST(MeshAuth, RanksWithTheSameSecretConnectAndReduce) {
  auto store = std::make_shared<HashStore>();
  spawn(3, [&](int rank) {
    auto backend =
        tcp::make_tcp_backend(config_for("same", rank, 3, store, 30s, "the job's secret"));
    std::vector<float> x(1000, static_cast<float>(rank + 1));
    backend->run(sum_op(0, x));
    for (float v : x) ASSERT_EQ(v, 6.0f);
    backend->shutdown(Deadline::after(5s));
  });
}

// Rank 1's secret differs: it learns so from rank 0's verdict at once (an AuthError naming rank 0
// and the fix), not from a timeout; rank 0 keeps waiting for a rank 1 that proves the secret.
TEST(MeshAuth, ARankWithAnotherSecretGetsAnAuthErrorAtOnce) {
  auto store = std::make_shared<HashStore>();
  std::string error;
  double seconds = 0;
  spawn(2, [&](int rank) {
    const std::string secret = rank == 1 ? "another secret" : "the job's secret";
    const auto start = Clock::now();
    try {
      auto backend = tcp::make_tcp_backend(
          config_for("differs", rank, 2, store, rank == 0 ? 3s : 30s, secret));
      ADD_FAILURE() << "rank " << rank << " connected";
    } catch (const AuthError& e) {
      EXPECT_EQ(rank, 1) << e.what();
      error = e.what();
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
    } catch (const TimeoutError& e) {
      EXPECT_EQ(rank, 0) << e.what();  // the only rank 1 it saw was refused
      EXPECT_TRUE(contains(e.what(), "rank(s) 1")) << e.what();
    }
  });
  EXPECT_TRUE(contains(error, "rank 0 (127.0.0.1:")) << error;
  EXPECT_TRUE(contains(error, "refused this rank: their secrets differ")) << error;
  EXPECT_TRUE(contains(error, "--secret-file")) << error;
  EXPECT_LT(seconds, 5.0) << "the refusal waited for a timeout";
}

TEST(MeshAuth, ARankWithoutTheSecretOfTheOthersGetsAnAuthError) {
  auto store = std::make_shared<HashStore>();
  std::string error;
  spawn(2, [&](int rank) {
    try {
      tcp::make_tcp_backend(
          config_for("none", rank, 2, store, 3s, rank == 1 ? "" : "the job's secret"));
    } catch (const AuthError& e) {
      EXPECT_EQ(rank, 1);
      error = e.what();
    } catch (const TimeoutError&) {
      EXPECT_EQ(rank, 0);
    }
  });
  EXPECT_TRUE(contains(error, "has the job's secret and this rank has none")) << error;
}

// An outsider that knows the wire format connects first, claims rank 1 and sends a made-up proof:
// it reads a refusal and then the end of the stream (no data, no hello); the real rank 1 then
// connects and the group reduces correctly.
TEST(MeshAuth, AnOutsiderWithoutTheSecretIsRefusedAndTheJobGoesOn) {
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> outsider_done{false};
  spawn(3, [&](int who) {
    if (who == 2) {
      const uint16_t port = published_port(*store, "outsider", 0);
      Deadline d = Deadline::after(10s);
      net::Fd fd = net::connect_tcp("127.0.0.1", port, d, false);
      // The data plane's hello (src/net/hello.h), as an outsider that knows the format sends it:
      // "a proof follows".
      net::Hello h{.service = net::Service::mesh,
                   .flags = net::kHasSecret,
                   .group_hash = fnv1a("outsider"),
                   .size = 2,
                   .rank = 1};
      auth::ConnectProof forged;
      forged.nonce.fill(7);
      forged.proof.fill(9);
      net::write_full(fd.get(), &h, sizeof h, d, "outsider");
      net::write_full(fd.get(), &forged, sizeof forged, d, "outsider");
      auth::Verdict verdict;
      net::read_full(fd.get(), &verdict, sizeof verdict, d, "outsider");
      EXPECT_EQ(verdict.status, auth::VerdictStatus::wrong_proof);
      char more = 0;
      EXPECT_EQ(::recv(fd.get(), &more, 1, 0), 0) << "the outsider got more than its verdict";
      outsider_done = true;
      return;
    }
    if (who == 1)
      while (!outsider_done) std::this_thread::sleep_for(5ms);
    auto backend = tcp::make_tcp_backend(config_for("outsider", who, 2, store, 30s, "s3cret"));
    std::vector<float> x(1000, static_cast<float>(who + 1));
    backend->run(sum_op(0, x));
    for (float v : x) ASSERT_EQ(v, 3.0f);
    backend->shutdown(Deadline::after(5s));
  });
}

// The group advertises 127.0.0.1: its listener is bound there, not on every interface.
TEST(MeshAuth, TheListenerBindsTheAdvertisedLoopbackAddress) {
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> checked{false};
  spawn(2, [&](int rank) {
    if (rank == 1) {
      const uint16_t port = published_port(*store, "bound", 0);
      // Nothing answers on another address of this host's loopback range for that port.
      net::Fd fd;
      const int err = net::connect_tcp_once("127.0.0.2", port, Deadline::after(2s), fd);
      EXPECT_NE(err, 0) << "rank 0's listener answers on 127.0.0.2: it binds every interface";
      checked = true;
    }
    auto backend = tcp::make_tcp_backend(config_for("bound", rank, 2, store));
    std::vector<float> x(10, 1.0f);
    backend->run(sum_op(0, x));
    backend->shutdown(Deadline::after(5s));
  });
  EXPECT_TRUE(checked);
}

}  // namespace
}  // namespace lockstep::testing
