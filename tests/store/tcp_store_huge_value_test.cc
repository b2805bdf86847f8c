// Clients that announce a 2^40-byte value (1 TiB) after a good handshake, while ranks rendezvous:
// each is refused as soon as the length arrives, before anything is allocated for it, with a
// warning naming the limit (kMaxValueBytes, store/protocol.h), and the server keeps serving.
#include <thread>

#include "lockstep/store/tcp_store.h"
#include "store/protocol.h"
#include "store_abuse.h"
#include "store_test_util.h"
#include "support/messages.h"

namespace lockstep::store_test {
namespace {

using testing::count_of;

constexpr int kRanks = 4;
constexpr int kAbusers = 16;
constexpr uint64_t kHuge = uint64_t{1} << 40;
// What a 4-rank rendezvous may take beside the abusers; it takes tens of milliseconds alone.
constexpr milliseconds kRendezvousBound{3'000};
// Growth of this process's peak memory the abusers may cause: nothing near what they announce.
constexpr long kGrowthBoundKib = 64 * 1024;

TEST(TcpStoreHugeValue, A2To40ByteValueIsRefusedWhenItsLengthArrivesWhileRanksRendezvous) {
  TcpStoreServer server({.bind_host = "127.0.0.1", .port = 0, .secret = kAbuseSecret});
  const long peak_before = status_kib("VmHWM");
  ::testing::internal::CaptureStderr();
  milliseconds took{};
  std::thread ranks(
      [&] { took = run_rendezvous(server.port(), kRanks, kAbuseSecret, milliseconds(10'000)); });
  std::vector<net::Fd> abusers;
  for (int i = 0; i < kAbusers; ++i) {
    abusers.push_back(raw_authenticated(server.port(), kAbuseSecret));
    raw_send(abusers.back().get(), set_announcing("huge" + std::to_string(i), kHuge));
  }
  for (auto& fd : abusers) {
    size_t seen = 0;
    EXPECT_TRUE(closed_by_peer(fd.get(), milliseconds(3'000), &seen))
        << "the server kept a connection that announced " << kHuge << " bytes";
    EXPECT_EQ(seen, 0u) << "the server answered it";
  }
  ranks.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_LT(took, kRendezvousBound);
  EXPECT_LT(status_kib("VmHWM") - peak_before, kGrowthBoundKib) << "KiB of peak memory";
  // One warning per abuser, naming the length, the limit and its name.
  EXPECT_EQ(
      count_of(log, "announces a value of 1099511627776 bytes, over the store's limit of " +
                        std::to_string(store_proto::kMaxValueBytes) + " bytes (kMaxValueBytes)"),
      size_t{kAbusers})
      << log;
  TcpStore probe({.port = server.port(), .timeout = milliseconds(5'000), .secret = kAbuseSecret});
  EXPECT_FALSE(probe.check({"huge0"}));
  probe.set("after", "served");
  EXPECT_EQ(probe.get("after"), "served");
}

}  // namespace
}  // namespace lockstep::store_test
