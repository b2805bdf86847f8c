// Point-to-point with independent progress (src/p2p/engine.h), ranks as threads on tcp, shm and
// hier: orders that deadlock when p2p ops run one at a time (recv before send, a pending recv
// before a collective), ring shifts at world 2 to 8, all-to-all and any-source gathers over p2p,
// a 1F1B pipeline against its closed form, zero-byte and 1 GiB messages, and each diagnosis: a
// true deadlock, a tag mismatch, a size mismatch, a peer that left.
#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class P2P : public ::testing::TestWithParam<std::string> {
 protected:
  void run(int world, const std::function<void(ProcessGroup&)>& fn, seconds timeout = seconds(60)) {
    spawn_groups(world, fn, GetParam(), timeout);
  }
};

long elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

// The halo exchange: each rank posts its recv, then its send, then waits for both. When p2p ops
// ran one at a time this waited for the whole timeout; now it completes at once, small and large.
TEST_P(P2P, RecvThenSendOnBothRanksCompletesAtOnce) {
  for (size_t count : {size_t{16}, size_t{1} << 20}) {
    run(2, [count](ProcessGroup& pg) {
      const int peer = 1 - pg.rank();
      std::vector<float> out(count, static_cast<float>(pg.rank() + 1)), in(count, 0.0f);
      auto start = Clock::now();
      auto r = pg.irecv(view(in), peer);
      auto s = pg.isend(view(out), peer);
      r->wait();
      s->wait();
      EXPECT_LT(elapsed_ms(start), 10'000) << count;
      EXPECT_EQ(in.front(), static_cast<float>(peer + 1));
      EXPECT_EQ(in.back(), static_cast<float>(peer + 1));
    });
  }
}

TEST_P(P2P, RingShiftWithIsendIrecvAtWorldTwoToEight) {
  for (int world : {2, 3, 5, 8}) {
    run(world, [world](ProcessGroup& pg) {
      const int next = (pg.rank() + 1) % world, prev = (pg.rank() + world - 1) % world;
      std::vector<int64_t> token(1000), got(1000);
      std::iota(token.begin(), token.end(), int64_t{pg.rank()} * 1000);
      for (int step = 0; step < 3; ++step) {
        auto r = pg.irecv(view(got), prev, {.tag = static_cast<uint32_t>(step)});
        auto s = pg.isend(view(token), next, {.tag = static_cast<uint32_t>(step)});
        r->wait();
        s->wait();
        token = got;
      }
      // After 3 shifts, rank r holds rank (r - 3)'s original token.
      const int64_t origin = ((pg.rank() - 3) % world + world) % world;
      EXPECT_EQ(token.front(), origin * 1000) << "world " << world;
      EXPECT_EQ(token.back(), origin * 1000 + 999) << "world " << world;
    });
  }
}

TEST_P(P2P, AllToAllOverBatchIsendIrecv) {
  const int world = 4;
  run(world, [](ProcessGroup& pg) {
    const size_t k = 3000;  // 48 KiB to rank 0 (eager) up to 192 KiB to rank 3 (rendezvous)
    std::vector<std::vector<int32_t>> out(world), in(world);
    std::vector<P2POp> ops;
    for (int p = 0; p < world; ++p) {
      if (p == pg.rank()) continue;
      out[p].assign(k * (p + 1) * 4, pg.rank() * 100 + p);  // sizes differ by pair (some large)
      in[p].assign(k * (pg.rank() + 1) * 4, -1);
      ops.push_back(P2POp::recv(view(in[p]), p, 9));
      ops.push_back(P2POp::send(view(out[p]), p, 9));
    }
    pg.batch_isend_irecv(ops)->wait();
    for (int p = 0; p < world; ++p) {
      if (p == pg.rank()) continue;
      EXPECT_EQ(in[p].front(), p * 100 + pg.rank());
      EXPECT_EQ(in[p].back(), p * 100 + pg.rank());
    }
  });
}

TEST_P(P2P, AnySourceGatherReportsEachSender) {
  const int world = 5;
  run(world, [](ProcessGroup& pg) {
    if (pg.rank() != 0) {
      std::vector<int32_t> mine(64, pg.rank());
      // Later ranks send first, so arrival order differs from rank order.
      std::this_thread::sleep_for(milliseconds(10 * (world - pg.rank())));
      pg.send(view(mine), 0, {.tag = 2})->wait();
      return;
    }
    std::vector<int> seen;
    for (int i = 1; i < world; ++i) {
      std::vector<int32_t> got(64, -1);
      auto w = pg.recv_any(view(got), {.tag = 2});
      w->wait();
      EXPECT_EQ(got.front(), w->source_rank());
      EXPECT_EQ(got.back(), w->source_rank());
      seen.push_back(w->source_rank());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4}));
  });
}

// 1F1B: 4 stages x 8 micro-batches. Stage s computes y = 2x + s forward and passes dL/dx = 2 g
// backward; the last stage's loss gradient is its output. Activations and gradients travel
// between the same pairs in both directions, under different tags.
constexpr int kStages = 4, kMicro = 8;
constexpr size_t kWidth = 4096;  // 16 KiB per message: eager; other tests cover large ones

TEST_P(P2P, OneForwardOneBackwardPipelineMatchesTheClosedForm) {
  run(kStages, [](ProcessGroup& pg) {
    const int stages = kStages, micro = kMicro;
    const size_t width = kWidth;
    const int s = pg.rank();
    std::vector<std::vector<float>> act(micro);    // this stage's input per micro-batch
    std::vector<std::vector<float>> grads(micro);  // stage 0: the gradient reaching the input
    std::vector<WorkPtr> pending;
    auto forward = [&](int m) {
      std::vector<float> x(width, static_cast<float>(m));
      if (s > 0) pg.recv(view(x), s - 1, {.tag = 0})->wait();
      act[m] = x;
      auto y = std::make_shared<std::vector<float>>(width);
      for (size_t i = 0; i < width; ++i) (*y)[i] = 2 * x[i] + static_cast<float>(s);
      if (s < stages - 1) {
        auto w = pg.isend(view(*y), s + 1, {.tag = 0});
        w->on_complete([y](std::exception_ptr) {});  // keeps the buffer alive until sent
        pending.push_back(w);
      } else {
        grads[m] = *y;  // dL/dy = y at the last stage
      }
    };
    auto backward = [&](int m) {
      std::vector<float> g(width);
      if (s < stages - 1) {
        pg.recv(view(g), s + 1, {.tag = 1})->wait();
      } else {
        g = grads[m];
      }
      auto dx = std::make_shared<std::vector<float>>(width);
      for (size_t i = 0; i < width; ++i) (*dx)[i] = 2 * g[i];
      if (s > 0) {
        auto w = pg.isend(view(*dx), s - 1, {.tag = 1});
        w->on_complete([dx](std::exception_ptr) {});
        pending.push_back(w);
      } else {
        grads[m] = *dx;
      }
    };
    const int warmup = std::min(stages - s - 1, micro);
    int f = 0, b = 0;
    for (; f < warmup; ++f) forward(f);
    for (; f < micro; ++f, ++b) {
      forward(f);
      backward(b);
    }
    for (; b < micro; ++b) backward(b);
    for (auto& w : pending) w->wait();
    if (s != 0) return;
    for (int m = 0; m < micro; ++m) {
      float y = static_cast<float>(m);
      for (int k = 0; k < stages; ++k) y = 2 * y + static_cast<float>(k);
      const float want = y * 16;  // dL/dx0 = dL/dy_last * 2^stages (each stage's dy/dx = 2)
      EXPECT_EQ(grads[m].front(), want) << "micro-batch " << m;
      EXPECT_EQ(grads[m].back(), want) << "micro-batch " << m;
    }
  });
}

TEST_P(P2P, ZeroByteMessagesAreMatchedInOrder) {
  run(2, [](ProcessGroup& pg) {
    std::vector<float> none;
    std::vector<float> one(1, 7.0f);
    if (pg.rank() == 0) {
      auto a = pg.send(view(none), 1, {.tag = 4});
      auto b = pg.send(view(one), 1, {.tag = 4});
      a->wait();
      b->wait();
    } else {
      std::vector<float> got(1, 0.0f);
      pg.recv(view(none), 0, {.tag = 4})->wait();
      pg.recv(view(got), 0, {.tag = 4})->wait();
      EXPECT_EQ(got[0], 7.0f);
    }
  });
}

// Finished messages free everything they used (a batch and its ops once pointed at each other and
// leaked about a kilobyte per message): thousands of ping-pongs leave the heap where it was.
TEST_P(P2P, FinishedMessagesHoldNoMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // AddressSanitizer and ThreadSanitizer replace malloc: mallinfo2 would read glibc's idle arenas
  // (measuring nothing), and calling into them from the sanitizer's threads trips glibc's arena
  // bookkeeping (ASan at exit; under TSan, a segmentation fault in mallinfo2 itself).
  GTEST_SKIP() << "heap use is measured with glibc's malloc, not under a sanitizer";
#endif
  run(2, [](ProcessGroup& pg) {
    const int peer = 1 - pg.rank();
    std::vector<float> x(16, 1.0f);
    auto pingpong = [&](int rounds) {
      for (int i = 0; i < rounds; ++i) {
        if (pg.rank() == 0) {
          pg.send(view(x), peer)->wait();
          pg.recv(view(x), peer)->wait();
        } else {
          pg.recv(view(x), peer)->wait();
          pg.send(view(x), peer)->wait();
        }
      }
    };
    pingpong(200);  // warm: pools, deques and the flight recorder reach their steady sizes
    pg.barrier()->wait();
    const size_t before = mallinfo2().uordblks;  // every arena of the process: both ranks
    pg.barrier()->wait();
    pingpong(5000);
    pg.barrier()->wait();
    const size_t after = mallinfo2().uordblks;
    pg.barrier()->wait();
    // 20000 messages in all: a leak of even 64 bytes each would be 1.2 MiB.
    EXPECT_LT(after, before + (size_t{512} << 10))
        << "heap in use grew from " << before << " to " << after << " bytes";
  });
}

// Messages between one pair with one tag never overtake each other, large or small; another tag
// may be received first.
TEST_P(P2P, NonOvertakingPerTagWhileOtherTagsMatchOutOfOrder) {
  run(2, [](ProcessGroup& pg) {
    const size_t big = 1 << 18, small = 8;
    if (pg.rank() == 0) {
      std::vector<float> a(big, 1.0f), b(small, 2.0f), c(small, 3.0f);
      auto wa = pg.isend(view(a), 1, {.tag = 1});
      auto wb = pg.isend(view(b), 1, {.tag = 1});
      auto wc = pg.isend(view(c), 1, {.tag = 2});
      wa->wait();
      wb->wait();
      wc->wait();
    } else {
      std::vector<float> c(small), a(big), b(small);
      pg.recv(view(c), 0, {.tag = 2})->wait();  // the last send, received first
      auto wa = pg.irecv(view(a), 0, {.tag = 1});
      auto wb = pg.irecv(view(b), 0, {.tag = 1});
      wa->wait();
      wb->wait();
      EXPECT_EQ(c[0], 3.0f);
      EXPECT_EQ(a[big - 1], 1.0f);
      EXPECT_EQ(b[0], 2.0f);
    }
  });
}

// A pending recv does not hold up a collective issued after it, nor the reverse.
TEST_P(P2P, PendingRecvDoesNotBlockACollectiveQueuedAfterIt) {
  run(2, [](ProcessGroup& pg) {
    std::vector<float> msg(100, 0.0f), x(1000, 1.0f);
    if (pg.rank() == 0) {
      auto r = pg.irecv(view(msg), 1);
      pg.all_reduce(view(x))->wait();  // rank 1 sends only after this
      r->wait();
      EXPECT_EQ(msg[0], 5.0f);
    } else {
      pg.all_reduce(view(x))->wait();
      std::vector<float> five(100, 5.0f);
      pg.send(view(five), 0)->wait();
    }
    EXPECT_EQ(x[0], 2.0f);
  });
}

TEST_P(P2P, AGibibyteMessageIsStreamed) {
  run(2, [](ProcessGroup& pg) {
    const size_t n = (size_t{1} << 30) + 8;
    std::vector<uint8_t> buf(n);
    if (pg.rank() == 0) {
      for (size_t i = 0; i < n; i += 4096) buf[i] = static_cast<uint8_t>(i / 4096);
      buf[n - 1] = 0xAB;
      pg.send(view(buf), 1)->wait();
    } else {
      pg.recv(view(buf), 0)->wait();
      bool ok = buf[n - 1] == 0xAB;
      for (size_t i = 0; i < n && ok; i += 4096) ok = buf[i] == static_cast<uint8_t>(i / 4096);
      EXPECT_TRUE(ok);
    }
  });
}

// ---- diagnoses ----

// Both ranks only receive: at the deadline each names its own recv and the peer's. (Both stay in
// the group until both have failed: the barrier.)
TEST_P(P2P, TrueDeadlockNamesBothRanksRecvs) {
  run(
      2,
      [](ProcessGroup& pg) {
        const int peer = 1 - pg.rank();
        std::vector<float> x(4096);
        auto start = Clock::now();
        try {
          pg.recv(view(x), peer, {.timeout = seconds(2)})->wait();
          ADD_FAILURE() << "a recv nobody sends to completed";
        } catch (const TimeoutError& e) {
          const std::string what = e.what();
          EXPECT_CONTAINS(what, detail::concat("rank ", pg.rank(), " waits in recv #0 from rank ",
                                               peer, " (tag 0, f32 x 4096)"));
          EXPECT_CONTAINS(what, detail::concat("rank ", peer, " waits in recv #0 from rank ",
                                               pg.rank(), " (tag 0, f32 x 4096)"));
          EXPECT_CONTAINS(what, "both ranks receive first, and neither sends (a deadlock)");
        }
        EXPECT_LT(elapsed_ms(start), 6'000);
        pg.barrier()->wait();
      },
      seconds(30));
}

TEST_P(P2P, TagMismatchIsNamedAtTheDeadline) {
  run(
      2,
      [](ProcessGroup& pg) {
        std::vector<float> x(10, 1.0f);
        if (pg.rank() == 0) {
          pg.send(view(x), 1, {.tag = 5})->wait();  // eager: done once sent
        } else {
          try {
            pg.recv(view(x), 0, {.tag = 6, .timeout = seconds(2)})->wait();
            ADD_FAILURE() << "a recv of tag 6 matched a send of tag 5";
          } catch (const TimeoutError& e) {
            EXPECT_CONTAINS(std::string(e.what()), "recv #0 from rank 0 (tag 6, f32 x 10)");
            EXPECT_CONTAINS(std::string(e.what()), "the messages rank 0 sent it carry tag 5");
            EXPECT_CONTAINS(std::string(e.what()), "a tag mismatch");
          }
        }
        pg.barrier()->wait();  // rank 0 stays in the group until rank 1's recv has timed out
      },
      seconds(30));
}

// The same, but the sender leaves: the recv fails at once, and still points at the tags.
TEST_P(P2P, TagMismatchWithASenderThatLeftFailsAtOnce) {
  run(
      2,
      [](ProcessGroup& pg) {
        std::vector<float> x(10, 1.0f);
        if (pg.rank() == 0) {
          pg.send(view(x), 1, {.tag = 5})->wait();
          return;  // destroys its group
        }
        auto start = Clock::now();
        expect_error_naming<NetworkError>(
            [&] { pg.recv(view(x), 0, {.tag = 6})->wait(); },
            {"recv #0 from rank 0: rank 0 left the group: rank 0 destroyed its process group",
             "sent that no recv took carry tag 5, but this recv waits for tag 6: a tag mismatch?"});
        EXPECT_LT(elapsed_ms(start), 10'000);
      },
      seconds(30));
}

TEST_P(P2P, SizeMismatchFailsBothSidesNamingBothSizes) {
  for (size_t sent : {size_t{10}, size_t{100'000}}) {  // eager, and large (both sides fail)
    run(2, [sent](ProcessGroup& pg) {
      const std::string expected = detail::concat(
          "rank 1's recv #0 from rank 0 (tag 3) expects f32 x ", sent + 2, " (", (sent + 2) * 4,
          " bytes), but the send of rank 0 it matched (tag 3) carries f32 x ", sent, " (", sent * 4,
          " bytes)");
      if (pg.rank() == 0) {
        std::vector<float> x(sent, 1.0f);
        auto w = pg.send(view(x), 1, {.tag = 3});
        if (sent > 1000) {
          expect_error_naming<MismatchError>([&] { w->wait(); }, {"send #0 to rank 1", expected});
        } else {
          w->wait();  // an eager send is done once its bytes are out
        }
      } else {
        std::vector<float> y(sent + 2);
        expect_error_naming<MismatchError>([&] { pg.recv(view(y), 0, {.tag = 3})->wait(); },
                                           {expected});
      }
      // The pair is still usable.
      std::vector<float> z(4, static_cast<float>(pg.rank()));
      if (pg.rank() == 0)
        pg.send(view(z), 1)->wait();
      else
        pg.recv(view(z), 0)->wait();
      EXPECT_EQ(z[0], 0.0f);
    });
  }
}

// A rank whose group is destroyed while the peer waits for it: the peer fails at once, told why.
TEST_P(P2P, PeerThatLeavesIsNamedAtOnceWithItsReason) {
  auto store = std::make_shared<HashStore>();
  const std::string backend = GetParam();
  spawn(2, [&](int rank) {
    auto start = Clock::now();
    try {
      auto pg = init_process_group({.backend = backend,
                                    .rank = rank,
                                    .world_size = 2,
                                    .store = store,
                                    .timeout = seconds(60),
                                    .group_name = "leaver"});
      std::vector<float> x(1000, 1.0f);
      pg->all_reduce(view(x))->wait();
      if (rank == 1) throw std::runtime_error("rank 1's own failure");
      pg->recv(view(x), 1)->wait();
      ADD_FAILURE() << "received from a rank that failed";
    } catch (const NetworkError& e) {
      EXPECT_EQ(rank, 0);
      EXPECT_CONTAINS(std::string(e.what()),
                      "recv #0 from rank 1: rank 1 left the group: rank "
                      "1's process group was destroyed while an "
                      "exception propagated through its stack");
      EXPECT_CONTAINS(std::string(e.what()), "see its own error");
      EXPECT_LT(elapsed_ms(start), 20'000);
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(rank, 1) << e.what();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, P2P, ::testing::Values("tcp", "shm", "hier"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lockstep::testing
