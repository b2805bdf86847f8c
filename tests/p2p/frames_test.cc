// The p2p engine's frame header (src/p2p/frames.h): what a corrupt or foreign stream gets.
#include "p2p/frames.h"

#include <gtest/gtest.h>

#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::p2p {
namespace {

using testing::expect_error_naming;

TEST(Frames, EveryKindTheEngineWritesPasses) {
  for (FrameKind k :
       {FrameKind::eager, FrameKind::rts, FrameKind::cts, FrameKind::data, FrameKind::nack,
        FrameKind::cancel, FrameKind::query, FrameKind::reply, FrameKind::bye}) {
    FrameHeader h;
    h.kind = k;
    h.bytes = 1 << 30;  // data: any size; eager and texts: up to their limits
    if (k == FrameKind::eager) h.bytes = kEagerBytes;
    if (k == FrameKind::nack || k == FrameKind::cancel || k == FrameKind::reply ||
        k == FrameKind::bye)
      h.bytes = kMaxTextBytes;
    EXPECT_NO_THROW(check_frame(h, 1)) << frame_kind_name(k);
  }
  EXPECT_TRUE(carries_payload(FrameKind::eager));
  EXPECT_FALSE(carries_payload(FrameKind::rts));
  EXPECT_FALSE(carries_payload(FrameKind::query));
}

TEST(Frames, ForeignBytesAreANetworkErrorNamingThePeer) {
  FrameHeader bad_magic;
  bad_magic.magic = 0x47455420;  // "GET " : an HTTP client on the port
  expect_error_naming<NetworkError>(
      [&] { check_frame(bad_magic, 3); },
      {"rank 3 sent bytes that are not a lockstep p2p frame", "Restart the job"});
  FrameHeader bad_kind;
  bad_kind.kind = static_cast<FrameKind>(77);
  expect_error_naming<NetworkError>([&] { check_frame(bad_kind, 2); }, {"kind 77"});
  FrameHeader huge_text;
  huge_text.kind = FrameKind::bye;
  huge_text.bytes = kMaxTextBytes + 1;
  expect_error_naming<NetworkError>([&] { check_frame(huge_text, 2); },
                                    {"a bye frame of 65537 bytes of text"});
  FrameHeader bad_dtype;
  bad_dtype.dtype = 200;
  expect_error_naming<NetworkError>([&] { check_frame(bad_dtype, 2); }, {"unknown dtype (200)"});
}

// Found by fuzz/p2p_frame_fuzz.cc: an eager frame announcing 16 MiB passed, and the engine sets
// aside room for an unclaimed eager message's whole payload before reading it.
TEST(Frames, EagerFrameBeyondTheEagerLimitIsCorrupt) {
  FrameHeader h;
  h.kind = FrameKind::eager;
  h.bytes = (uint64_t{1} << 24) + 16;
  expect_error_naming<NetworkError>([&] { check_frame(h, 1); },
                                    {"rank 1 sent an eager frame of 16777232 bytes",
                                     "eager messages are at most 65536", "Restart the job"});
  h.bytes = ~uint64_t{0};
  EXPECT_THROW(check_frame(h, 1), NetworkError);
  h.kind = FrameKind::rts;  // a large message announces itself; the recv decides
  EXPECT_NO_THROW(check_frame(h, 1));
}

}  // namespace
}  // namespace lockstep::p2p
