// The p2p engine's frame header (src/p2p/frames.h): what a corrupt or foreign stream gets.
#include "p2p/frames.h"

#include <gtest/gtest.h>

#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::p2p {
namespace {

using testing::expect_error_naming;

TEST(Frames, EveryKindTheEngineWritesPasses) {
  for (FrameKind k : {FrameKind::eager, FrameKind::rts, FrameKind::cts, FrameKind::data,
                      FrameKind::nack, FrameKind::cancel, FrameKind::query, FrameKind::reply,
                      FrameKind::bye}) {
    FrameHeader h;
    h.kind = k;
    h.bytes = carries_payload(k) && k != FrameKind::data && k != FrameKind::eager ? 100 : 1 << 30;
    EXPECT_NO_THROW(check_frame(h, 1)) << frame_kind_name(k);
  }
  EXPECT_TRUE(carries_payload(FrameKind::eager));
  EXPECT_FALSE(carries_payload(FrameKind::rts));
  EXPECT_FALSE(carries_payload(FrameKind::query));
}

TEST(Frames, ForeignBytesAreANetworkErrorNamingThePeer) {
  FrameHeader bad_magic;
  bad_magic.magic = 0x47455420;  // "GET " : an HTTP client on the port
  expect_error_naming<NetworkError>([&] { check_frame(bad_magic, 3); },
                                    {"rank 3 sent bytes that are not a lockstep p2p frame",
                                     "Restart the job"});
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
  expect_error_naming<NetworkError>([&] { check_frame(bad_dtype, 2); },
                                    {"unknown dtype (200)"});
}

}  // namespace
}  // namespace lockstep::p2p
