// What the RPC codec (src/rpc/codec.h) refuses: every way a malformed body is refused (a
// CodecError, never a crash or a huge allocation), and what the encoder refuses to send.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "lockstep/rpc/rpc.h"
#include "rpc/codec.h"
#include "rpc/codec_fixtures.h"
#include "support/messages.h"

// clang says whether a sanitizer is on through __has_feature, gcc through __SANITIZE_*__.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define LOCKSTEP_TEST_SANITIZED 1
#endif
#endif
#ifndef LOCKSTEP_TEST_SANITIZED
#define LOCKSTEP_TEST_SANITIZED 0
#endif

namespace lockstep::rpc {
namespace {

using lockstep::testing::contains;
using lockstep::testing::message_of;

// ---- Malformed bodies ----------------------------------------------------------------------

// A value that uses every tag, with tensors.
Message rich_message() {
  return encoded(
      Value(Tuple{{Value(), true, false, int64_t{-3}, 2.5, "s\xC3\xA9", Bytes{"b\0"},
                   List{1, List{}}, Dict{{Value(1), Tuple{}}, {"t", tensor(ElementType::f32, {2})}},
                   tensor(ElementType::u8, {}), tensor(ElementType::c64, {0, 3})}}));
}

TEST(CodecRejects, EveryTruncationOfAValidBody) {
  const Message whole = received(rich_message());
  ASSERT_NO_THROW(decode_whole(whole));
  for (size_t n = 0; n < whole.body.size(); ++n) {
    Message cut = whole;
    cut.body.resize(n);
    const std::string why = refusal(cut);
    EXPECT_TRUE(contains(why, "malformed message body")) << n << ": " << why;
  }
}

TEST(CodecRejects, UnknownTagsNamingTheOffset) {
  for (int tag : {0x0B, 0x2A, 0x80, 0xFF}) {
    EXPECT_TRUE(contains(refusal(raw({tag})), "unknown " + tag_name(tag))) << tag;
    const std::string why = refusal(raw({0x07, 0x01, 0, 0, 0, tag}));
    EXPECT_TRUE(contains(why, "at byte 5 of 6")) << why;
  }
  EXPECT_EQ(tag_name(0x2A), "tag 0x2a");
  EXPECT_EQ(tag_name(10), "tensor");
  // An unknown element type is refused as well.
  EXPECT_TRUE(contains(refusal(tensor_head(kElementTypes, {1}, 0), {pattern_blob(1)}),
                       "unknown tensor element type 12"));
}

TEST(CodecRejects, CountsLargerThanTheBytesLeft) {
  const std::string three = "abc";
  for (int tag : {0x05, 0x06, 0x07, 0x08}) {
    EXPECT_TRUE(contains(refusal(raw({tag}) + le32(0xFFFFFFFF) + three), "4294967295 items"));
    EXPECT_TRUE(contains(refusal(raw({tag}) + le32(4) + three), "more than the 3 bytes left"));
  }
  // A dict's pair takes 2 bytes at least: 2 pairs do not fit in 3 bytes.
  EXPECT_TRUE(contains(refusal(raw({0x09}) + le32(2) + raw({0, 0, 0})), "a dict of 2 items"));
  // Counts that fit the bytes but whose items are not there.
  EXPECT_NE(refusal(raw({0x07}) + le32(3) + raw({0x03, 0, 0})), "");
  // A count whose own bytes are cut.
  EXPECT_TRUE(contains(refusal(raw({0x05, 0x01, 0x00})), "2 bytes short"));
}

// Decodes `body` in a child process whose address space is capped at what it uses now plus
// `headroom`; the exit code says how decoding ended: 0 CodecError, 2 std::bad_alloc, 3 a value.
int decode_with_capped_memory(const std::string& body, size_t headroom) {
  pid_t pid = ::fork();
  if (pid == 0) {
    size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlimit cap{};
    cap.rlim_cur = cap.rlim_max = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) + headroom;
    if (::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(9);
    int code = 4;
    try {
      Message m = message(body);
      Reader r(m);
      (void)decode(r);
      code = 3;
    } catch (const CodecError&) {
      code = 0;
    } catch (const std::bad_alloc&) {
      code = 2;
    } catch (...) {
      code = 5;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CodecRejects, LyingCountsDoNotAllocateForWhatIsNotThere) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || LOCKSTEP_TEST_SANITIZED
  GTEST_SKIP() << "the address-space cap does not apply under a sanitizer's shadow memory";
#endif
  // A 64 MiB body (the most a frame carries) whose list claims an item per byte, then has
  // garbage at its second item: the decoder must not set aside room for 64 Mi values first.
  constexpr size_t kBody = 64u << 20;
  std::string body = raw({0x07}) + le32(kBody - 5) + raw({0x00, 0xFF});
  body.resize(kBody, '\xFF');
  EXPECT_EQ(decode_with_capped_memory(body, 1u << 30), 0);
  // 64 lists one inside the other, each claiming every byte left: room set aside at each level
  // would add up to 64 times the body's values.
  std::string nested;
  for (int i = 0; i < kMaxDepth; ++i) nested += raw({0x07}) + le32((16u << 20) - 5 * (i + 1));
  nested += raw({0xFF});
  nested.resize(16u << 20, '\0');
  EXPECT_EQ(decode_with_capped_memory(nested, 1u << 30), 0);
}

TEST(CodecRejects, NestingDeeperThanTheLimit) {
  // n containers (list, tuple and dict in turn), each holding the next, the innermost None.
  auto nested = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      if (i % 3 == 0) s += raw({0x07}) + le32(1);
      if (i % 3 == 1) s += raw({0x08}) + le32(1);
      if (i % 3 == 2) s += raw({0x09}) + le32(1) + raw({0x00});  // key None, then the value
    }
    return s + raw({0x00});
  };
  EXPECT_NO_THROW(decode_whole(message(nested(kMaxDepth))));
  EXPECT_TRUE(contains(refusal(nested(kMaxDepth + 1)), "nesting deeper than 64"));
  EXPECT_TRUE(contains(refusal(nested(10000)), "nesting deeper than 64"));  // no stack overflow
}

TEST(CodecRejects, TextThatIsNotUtf8) {
  const std::string bad[] = {"\xC0\x80",
                             "\xC1\xBF",
                             "\xE0\x80\x80",
                             "\xE0\x9F\xBF",
                             "\xF0\x80\x80\x80",
                             "\xF0\x8F\xBF\xBF",  // overlong forms
                             "\xED\xA0\x80",
                             "\xED\xB0\x80",
                             "\xED\xBF\xBF",  // surrogates
                             "\xF4\x90\x80\x80",
                             "\xF5\x80\x80\x80",
                             "\xF7\xBF\xBF\xBF",  // past U+10FFFF
                             "\xF8\x88\x80\x80\x80",
                             "\xFC\x84\x80\x80\x80\x80",  // 5- and 6-byte forms
                             "\xC3",
                             "\xE6\x97",
                             "\xF0\x9F\x8E",
                             "ok\xC3",
                             "\xC3(",  // truncated sequences
                             "\x80",
                             "\xBF",
                             "a\x80z",
                             "\xFE",
                             "\xFF"};  // stray bytes
  for (const std::string& s : bad) {
    EXPECT_FALSE(is_utf8(s)) << ::testing::PrintToString(s);
    const std::string why = refusal(raw({0x05}) + le32(static_cast<uint32_t>(s.size())) + s);
    EXPECT_TRUE(contains(why, "not UTF-8")) << ::testing::PrintToString(s) << ": " << why;
    // The same bytes as bytes are fine: it is the text that is refused, not the framing.
    Value b = decode_whole(message(raw({0x06}) + le32(static_cast<uint32_t>(s.size())) + s));
    EXPECT_EQ(b.as_bytes().data, s);
  }
  for (const std::string& s :
       {std::string("\x7F"), std::string("\xC2\x80"), std::string("\xDF\xBF"),
        std::string("\xE0\xA0\x80"), std::string("\xED\x9F\xBF"), std::string("\xEE\x80\x80"),
        std::string("\xEF\xBF\xBF"), std::string("\xF0\x90\x80\x80"),
        std::string("\xF4\x8F\xBF\xBF")})
    EXPECT_TRUE(is_utf8(s)) << ::testing::PrintToString(s);
}

TEST(CodecRejects, TensorBlobsThatAreMissingReusedOrTheWrongSize) {
  // Index past the blobs.
  EXPECT_TRUE(contains(refusal(tensor_head(0, {1}, 0)), "tensor bytes #0 of a message that has 0"));
  EXPECT_TRUE(
      contains(refusal(tensor_head(0, {1}, 1), {pattern_blob(4)}), "#1 of a message that has 1"));
  EXPECT_NE(refusal(tensor_head(0, {1}, 0xFFFFFFFF), {pattern_blob(4)}), "");
  // One blob for two tensors.
  const std::string twice = raw({0x07}) + le32(2) + tensor_head(0, {1}, 0) + tensor_head(0, {1}, 0);
  EXPECT_TRUE(contains(refusal(twice, {pattern_blob(4), pattern_blob(4)}), "#0 used twice"));
  // ... while two tensors of two blobs are fine.
  const std::string two = raw({0x07}) + le32(2) + tensor_head(0, {1}, 1) + tensor_head(0, {1}, 0);
  EXPECT_NO_THROW(decode_whole(message(two, {pattern_blob(4), pattern_blob(4)})));
  // Blob sizes other than the shape's bytes (2 × 3 float32: 24).
  for (size_t n : {0, 4, 23, 25, 48}) {
    const std::string why = refusal(tensor_head(0, {2, 3}, 0), {pattern_blob(n)});
    EXPECT_TRUE(contains(why, "a tensor of 24 bytes whose bytes #0 are " + std::to_string(n)))
        << why;
  }
  EXPECT_NO_THROW(decode_whole(message(tensor_head(0, {2, 3}, 0), {pattern_blob(24)})));
}

TEST(CodecRejects, TensorShapesThatAreNegativeOverflowOrHaveTooManyDimensions) {
  const char* kBadShape = "a tensor shape with a negative or overflowing size";
  EXPECT_TRUE(contains(refusal(tensor_head(0, {-1}, 0), {pattern_blob(0)}), kBadShape));
  EXPECT_TRUE(contains(refusal(tensor_head(5, {2, -3}, 0), {pattern_blob(0)}), kBadShape));
  EXPECT_TRUE(
      contains(refusal(tensor_head(5, {std::numeric_limits<int64_t>::min()}, 0), {pattern_blob(0)}),
               kBadShape));
  // 2^62 × 2^62 bytes, and 2^61 float64s (2^64 bytes), overflow 64 bits.
  EXPECT_TRUE(
      contains(refusal(tensor_head(5, {int64_t{1} << 62, int64_t{1} << 62}, 0), {pattern_blob(0)}),
               kBadShape));
  EXPECT_TRUE(
      contains(refusal(tensor_head(1, {int64_t{1} << 61}, 0), {pattern_blob(0)}), kBadShape));
  // Huge dimensions next to a 0 still have an element count that int64 cannot hold: refused
  // whatever the order, rather than accepted as an empty tensor whose numel() overflows.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{int64_t{1} << 62, 2, 0},
                                     std::vector<int64_t>{0, int64_t{1} << 62, int64_t{1} << 62},
                                     std::vector<int64_t>{int64_t{1} << 62, 0, int64_t{1} << 62}})
    EXPECT_TRUE(contains(refusal(tensor_head(5, shape, 0), {pattern_blob(0)}), kBadShape))
        << shape[0] << " " << shape[1] << " " << shape[2];
  // A large but sound empty shape is carried.
  Value empty = decode_whole(message(tensor_head(5, {int64_t{1} << 40, 0}, 0), {pattern_blob(0)}));
  EXPECT_EQ(empty.as_tensor().numel(), 0);
  // More dimensions than kMaxDims (16), even of size 1.
  std::vector<int64_t> ones(kMaxDims + 1, 1);
  EXPECT_TRUE(
      contains(refusal(tensor_head(0, ones, 0), {pattern_blob(4)}), "a tensor of 17 dimensions"));
  ones.pop_back();
  EXPECT_NO_THROW(decode_whole(message(tensor_head(0, ones, 0), {pattern_blob(4)})));
  EXPECT_NE(refusal(raw({0x0A, 0, 255}), {pattern_blob(4)}), "");
}

TEST(CodecRejects, AValueOfAnotherKindThanTheReaderAsksFor) {
  Message m = encoded(Value("text"));
  Reader r(m);
  const std::string why = message_of<CodecError>([&] { r.integer(); });
  EXPECT_TRUE(contains(why, "expected int, found str")) << why;
  EXPECT_EQ(r.offset(), 0u);  // nothing consumed
  EXPECT_EQ(r.str(), "text");
  EXPECT_THROW(Reader(m, m.body.size() + 1), CodecError);
}

// ---- What the encoder refuses --------------------------------------------------------------

TEST(CodecEncodeRejects, TextThatIsNotUtf8) {
  for (const char* s : {"\xFF", "ok\xC3", "\xED\xA0\x80"}) {
    EXPECT_TRUE(contains(message_of<CodecError>([&] { encoded(Value(s)); }), "not UTF-8"));
    // Anywhere in the value, a dict's keys included.
    EXPECT_THROW(encoded(Value(Dict{{Value(s), 1}})), CodecError);
    EXPECT_THROW(encoded(Value(List{1, Tuple{{Value(s)}}})), CodecError);
    EXPECT_NO_THROW(encoded(Value(Bytes{s})));
  }
}

TEST(CodecEncodeRejects, TensorsWhoseBytesDoNotMatchTheirShape) {
  Tensor t = tensor(ElementType::f32, {2, 3});
  for (size_t n : {0, 23, 25, 96}) {
    Tensor lying = t;
    lying.nbytes = n;
    EXPECT_TRUE(contains(message_of<CodecError>([&] { encoded(Value(lying)); }),
                         std::to_string(n) + " bytes do not match its float32 shape"));
  }
  Tensor negative = t;
  negative.shape = {-2, -3};
  EXPECT_THROW(encoded(Value(negative)), CodecError);
  Tensor many = t;
  many.shape = std::vector<int64_t>(kMaxDims + 1, 1);
  many.shape[0] = 24 / 4;
  EXPECT_THROW(encoded(Value(many)), CodecError);
  Tensor unknown = t;
  unknown.type = static_cast<ElementType>(kElementTypes);
  EXPECT_THROW(encoded(Value(unknown)), CodecError);
  // Nothing of a refused value's tensor is left behind as a blob.
  Message m;
  EXPECT_THROW(encode(Value(Tensor{ElementType::f64, {2}, t.data, 8, t.owner}), m), CodecError);
  EXPECT_TRUE(m.blobs.empty());
}

}  // namespace
}  // namespace lockstep::rpc
