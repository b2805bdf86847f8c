// The RPC codec (src/rpc/codec.h) and the error body (src/rpc/error_body.h): the exact bytes of a
// value's encoding, written out by hand from the format in codec.h; round trips of every kind of
// Value through bytes received as a peer would receive them; every way a malformed body is refused
// (a CodecError, never a crash or a huge allocation); what the encoder refuses to send; and the
// error frame's body and the exception a caller raises for it.
#include "rpc/codec.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "lockstep/rpc/rpc.h"
#include "rpc/error_body.h"
#include "rpc/wire_bytes.h"
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

// A received blob of n bytes: its own memory, filled with a pattern that depends on `seed`.
Blob pattern_blob(size_t n, int seed = 0) {
  Blob b = allocate_blob(n);
  auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(b.data));
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(i * 31 + seed * 7 + 1);
  return b;
}

Message message(std::string body, std::vector<Blob> blobs = {}) {
  Message m;
  m.body = std::move(body);
  m.blobs = std::move(blobs);
  return m;
}

Message encoded(const Value& v) {
  Message m;
  encode(v, m);
  return m;
}

// What the peer holds after the frame arrives: the same body, and each blob's bytes copied into
// memory of its own (so that nothing compares equal just because it is the sender's memory).
Message received(const Message& sent) {
  Message m;
  m.body = sent.body;
  for (const Blob& b : sent.blobs) {
    Blob copy = allocate_blob(b.nbytes);
    if (b.nbytes) std::memcpy(const_cast<std::byte*>(copy.data), b.data, b.nbytes);
    m.blobs.push_back(std::move(copy));
  }
  return m;
}

// Decodes the one value that must make up the whole body.
Value decode_whole(const Message& m) {
  Reader r(m);
  Value v = decode(r);
  if (!r.at_end())
    ADD_FAILURE() << "the decoder stopped at byte " << r.offset() << " of " << m.body.size();
  return v;
}

Value round_trip(const Value& v) {
  return decode_whole(received(encoded(v)));
}

// The CodecError's message for decoding m (a failure when it decodes).
std::string refusal(const Message& m) {
  return message_of<CodecError>([&] {
    Reader r(m);
    (void)decode(r);
  });
}
std::string refusal(const std::string& body, std::vector<Blob> blobs = {}) {
  return refusal(message(body, std::move(blobs)));
}

// A tensor of its own bytes, filled with a pattern.
Tensor tensor(ElementType type, std::vector<int64_t> shape, int seed = 0) {
  Tensor t = Tensor::zeros(type, std::move(shape));
  auto* p = t.mutable_as<unsigned char>();
  for (size_t i = 0; i < t.nbytes; ++i) p[i] = static_cast<unsigned char>(i * 13 + seed + 5);
  return t;
}

// A tensor header as codec.h lays it out.
std::string tensor_head(int type, std::vector<int64_t> shape, uint32_t blob) {
  std::string s = raw({0x0A, type, static_cast<int>(shape.size())});
  for (int64_t d : shape) s += le64(static_cast<uint64_t>(d));
  return s + le32(blob);
}

// ---- The bytes -----------------------------------------------------------------------------

TEST(CodecEncoding, ScalarsAreOneTagByteThenLittleEndianFixedWidth) {
  EXPECT_EQ(encoded(Value()).body, raw({0x00}));
  EXPECT_EQ(encoded(Value(false)).body, raw({0x01}));
  EXPECT_EQ(encoded(Value(true)).body, raw({0x02}));
  EXPECT_EQ(encoded(Value(1)).body, raw({0x03, 0x01, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(encoded(Value(int64_t{-2})).body,
            raw({0x03, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(encoded(Value(int64_t{0x0102030405060708})).body,
            raw({0x03, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  // 1.0 is 0x3FF0000000000000, -2.5 is 0xC004000000000000.
  EXPECT_EQ(encoded(Value(1.0)).body, raw({0x04, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
  EXPECT_EQ(encoded(Value(-2.5)).body, raw({0x04, 0, 0, 0, 0, 0, 0, 0x04, 0xC0}));
  EXPECT_TRUE(encoded(Value(1)).blobs.empty());
}

TEST(CodecEncoding, TextAndBytesAreACountThenTheirBytes) {
  EXPECT_EQ(encoded(Value("hi")).body, raw({0x05, 0x02, 0, 0, 0, 'h', 'i'}));
  EXPECT_EQ(encoded(Value("")).body, raw({0x05, 0, 0, 0, 0}));
  // U+00E9 is C3 A9 in UTF-8: the count is of bytes, not of characters.
  EXPECT_EQ(encoded(Value("\xC3\xA9")).body, raw({0x05, 0x02, 0, 0, 0, 0xC3, 0xA9}));
  EXPECT_EQ(encoded(Value(Bytes{std::string("a\0b", 3)})).body,
            raw({0x06, 0x03, 0, 0, 0, 'a', 0, 'b'}));
}

TEST(CodecEncoding, ContainersAreACountThenTheirItems) {
  EXPECT_EQ(encoded(Value(Dict{})).body, raw({0x09, 0, 0, 0, 0}));
  EXPECT_EQ(encoded(Value(List{})).body, raw({0x07, 0, 0, 0, 0}));
  EXPECT_EQ(encoded(Value(Tuple{})).body, raw({0x08, 0, 0, 0, 0}));
  EXPECT_EQ(encoded(Value(List{1, Value()})).body,
            raw({0x07, 0x02, 0, 0, 0, 0x03, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x00}));
  EXPECT_EQ(encoded(Value(Tuple{{true, false}})).body, raw({0x08, 0x02, 0, 0, 0, 0x02, 0x01}));
  // A dict's count is of pairs; each pair is its key, then its value.
  EXPECT_EQ(encoded(Value(Dict{{"a", true}, {Value(), false}})).body,
            raw({0x09, 0x02, 0, 0, 0, 0x05, 0x01, 0, 0, 0, 'a', 0x02, 0x00, 0x01}));
}

TEST(CodecEncoding, ATensorIsItsHeaderInTheBodyAndItsBytesAsABlob) {
  Tensor t = tensor(ElementType::f32, {2, 3});
  Message m = encoded(Value(t));
  // tag 10, element type f32 = 0, 2 dimensions, 2 and 3 as i64, blob #0.
  EXPECT_EQ(m.body,
            raw({0x0A, 0x00, 0x02, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  ASSERT_EQ(m.blobs.size(), 1u);
  // The bytes are not copied: the blob is the tensor's memory, kept alive by its owner.
  EXPECT_EQ(m.blobs[0].data, t.data);
  EXPECT_EQ(m.blobs[0].nbytes, 24u);
  EXPECT_EQ(m.blobs[0].owner, t.owner);
}

TEST(CodecEncoding, TensorsTakeBlobsInTheOrderTheyAreWritten) {
  Tensor a = tensor(ElementType::i64, {1}), b = tensor(ElementType::u8, {});
  Message m = encoded(Value(List{a, Value(Dict{{"b", b}})}));
  // i64 is element type 8, u8 is 5; a 0-d tensor has no dimensions.
  const std::string want = raw({0x07, 0x02, 0, 0, 0}) + tensor_head(8, {1}, 0) +
                           raw({0x09, 0x01, 0, 0, 0, 0x05, 0x01, 0, 0, 0, 'b'}) +
                           tensor_head(5, {}, 1);
  EXPECT_EQ(m.body, want);
  ASSERT_EQ(m.blobs.size(), 2u);
  EXPECT_EQ(m.blobs[0].data, a.data);
  EXPECT_EQ(m.blobs[1].data, b.data);
  EXPECT_EQ(m.blobs[1].nbytes, 1u);
}

TEST(CodecEncoding, HandWrittenBytesDecodeToTheirValues) {
  // The other direction: bytes written from the format alone, not by the encoder.
  Message m = message(raw({0x08, 0x04, 0, 0, 0}) + raw({0x03}) + le64(uint64_t(-5)) +
                          raw({0x05, 0x03, 0, 0, 0, 'a', 'b', 'c'}) + raw({0x04}) +
                          le64(0x4000000000000000) /* 2.0 */ + tensor_head(7, {2}, 0),
                      {pattern_blob(8)});
  Value v = decode_whole(m);
  const Tuple& t = v.as_tuple();
  ASSERT_EQ(t.items.size(), 4u);
  EXPECT_EQ(t.items[0].as_int(), -5);
  EXPECT_EQ(t.items[1].as_str(), "abc");
  EXPECT_EQ(t.items[2].as_float(), 2.0);
  const Tensor& x = t.items[3].as_tensor();
  EXPECT_EQ(x.type, ElementType::i32);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2}));
  // The tensor is the received blob itself, shared, not a copy of it.
  EXPECT_EQ(x.data, m.blobs[0].data);
  EXPECT_EQ(x.owner, m.blobs[0].owner);
}

TEST(CodecEncoding, ElementTypesHaveTheirSizesAndNames) {
  const std::pair<ElementType, size_t> sizes[] = {
      {ElementType::f32, 4},     {ElementType::f64, 8}, {ElementType::f16, 2},
      {ElementType::bf16, 2},    {ElementType::i8, 1},  {ElementType::u8, 1},
      {ElementType::i16, 2},     {ElementType::i32, 4}, {ElementType::i64, 8},
      {ElementType::boolean, 1}, {ElementType::c64, 8}, {ElementType::c128, 16}};
  for (auto [type, bytes] : sizes) EXPECT_EQ(element_bytes(type), bytes) << element_name(type);
  EXPECT_EQ(element_name(ElementType::f32), "float32");
  EXPECT_EQ(element_name(ElementType::i64), "int64");
  EXPECT_EQ(element_name(ElementType::boolean), "bool");
  EXPECT_EQ(element_bytes(static_cast<ElementType>(kElementTypes)), 0u);
}

// ---- Round trips ---------------------------------------------------------------------------

TEST(CodecRoundTrip, Scalars) {
  const Value values[] = {Value(),
                          Value(true),
                          Value(false),
                          Value(0),
                          Value(-1),
                          Value(std::numeric_limits<int64_t>::min()),
                          Value(std::numeric_limits<int64_t>::max()),
                          Value(0.0),
                          Value(3.25),
                          Value(-1e308),
                          Value(std::numeric_limits<double>::denorm_min()),
                          Value(std::numeric_limits<double>::infinity()),
                          Value(-std::numeric_limits<double>::infinity())};
  for (const Value& v : values) {
    Value back = round_trip(v);
    EXPECT_EQ(back.kind(), v.kind()) << describe(v);
    EXPECT_TRUE(back == v) << describe(v) << " came back as " << describe(back);
  }
  // An int stays an int (not a float), and the sign of -0.0 and a NaN survive.
  EXPECT_EQ(round_trip(Value(7)).kind(), Value::Kind::integer);
  EXPECT_TRUE(std::signbit(round_trip(Value(-0.0)).as_float()));
  EXPECT_TRUE(std::isnan(round_trip(Value(std::nan(""))).as_float()));
}

TEST(CodecRoundTrip, TextIsUnicodeAndBytesAreAnyBytes) {
  const std::string texts[] = {"",
                               "plain ascii",
                               "h\xC3\xA9llo w\xC3\xB6rld",             // 2-byte
                               "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",  // 3-byte
                               "\xF0\x9F\x8E\x89 party",                // 4-byte
                               "\xF4\x8F\xBF\xBF",                      // U+10FFFF
                               "\xEF\xBF\xBF\xED\x9F\xBF\xEE\x80\x80",  // U+FFFF, U+D7FF, U+E000
                               std::string("nul\0inside", 10)};
  for (const std::string& s : texts) {
    Value back = round_trip(Value(s));
    ASSERT_EQ(back.kind(), Value::Kind::str);
    EXPECT_EQ(back.as_str(), s);
  }
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte.push_back(static_cast<char>(i));
  for (const std::string& b : {std::string(), std::string("\0\0\0", 3), every_byte}) {
    Value back = round_trip(Value(Bytes{b}));
    ASSERT_EQ(back.kind(), Value::Kind::bytes);
    EXPECT_EQ(back.as_bytes().data, b);
  }
  // str and bytes of the same contents stay apart.
  EXPECT_FALSE(round_trip(Value(Bytes{"abc"})) == Value("abc"));
}

TEST(CodecRoundTrip, NestedContainersKeepTheirKindsAndOrder) {
  const Value v(Dict{
      {"list", List{1, 2.5, "three", List{}, Tuple{}, Dict{}}},
      {"tuple", Tuple{{Value(), List{List{List{true}}}, Bytes{std::string("\0x", 2)}}}},
      {"nested", Dict{{"a", Dict{{"b", Dict{{"c", Tuple{{1, 2}}}}}}}}},
      // Keys of every kind a dict may carry, in insertion order (not sorted).
      {Value(3), "int key"},
      {Value(Tuple{{1, "x"}}), "tuple key"},
      {Value(), "None key"},
      {Value(false), "bool key"},
      {Value(-0.5), "float key"},
      {Value(Bytes{"k"}), "bytes key"},
      {Value("a"), "str key after others"},
  });
  Value back = round_trip(v);
  EXPECT_TRUE(back == v) << describe(back);
  const Dict& d = back.as_dict();
  ASSERT_EQ(d.size(), 10u);
  EXPECT_EQ(d[3].first.as_int(), 3);
  EXPECT_EQ(d[4].first.kind(), Value::Kind::tuple);
  EXPECT_TRUE(d[5].first.is_none());
  EXPECT_EQ(d[9].first.as_str(), "a");
  EXPECT_EQ(back.at("list").as_list()[3].kind(), Value::Kind::list);
  EXPECT_EQ(back.at("list").as_list()[4].kind(), Value::Kind::tuple);
  EXPECT_EQ(back.at("list").as_list()[5].kind(), Value::Kind::dict);
  // A list and a tuple of the same items are different values, and stay different.
  EXPECT_FALSE(round_trip(Value(List{1})) == Value(Tuple{{1}}));
}

TEST(CodecRoundTrip, TensorsOfEveryElementTypeAndShape) {
  const std::pair<ElementType, std::vector<int64_t>> cases[] = {
      {ElementType::f32, {2, 3}},
      {ElementType::f64, {}},  // 0-d: one element
      {ElementType::f16, {5}},
      {ElementType::bf16, {1, 1, 1}},
      {ElementType::i8, {7}},
      {ElementType::u8, {3, 0, 5}},  // 0 elements
      {ElementType::i16, {2, 2}},
      {ElementType::i32, {4, 1}},
      {ElementType::i64, {0}},
      {ElementType::boolean, {4}},
      {ElementType::c64, {3}},
      {ElementType::c128, {2, 1}},
      {ElementType::f32, std::vector<int64_t>(kMaxDims, 1)},  // the most dimensions
      {ElementType::u8, {1 << 20}}};
  List all;
  int seed = 0;
  for (const auto& [type, shape] : cases) {
    Tensor t = tensor(type, shape, ++seed);
    Value back = round_trip(Value(t));
    ASSERT_EQ(back.kind(), Value::Kind::tensor);
    const Tensor& b = back.as_tensor();
    EXPECT_EQ(b.type, type);
    EXPECT_EQ(b.shape, shape);
    EXPECT_EQ(b.nbytes, t.nbytes);
    EXPECT_NE(b.data, t.data);  // received bytes, not the sender's
    EXPECT_TRUE(back == Value(t)) << element_name(type);
    all.push_back(t);
  }
  // The values themselves, read back as their element type.
  Value floats = round_trip(Value(Tensor::from(std::vector<float>{1.5f, -2.0f, 1e30f})));
  ASSERT_EQ(floats.as_tensor().nbytes, 12u);
  EXPECT_EQ(floats.as_tensor().as<float>()[0], 1.5f);
  EXPECT_EQ(floats.as_tensor().as<float>()[2], 1e30f);
  Value ints = round_trip(Value(Tensor::from(std::vector<int64_t>{-7, int64_t{1} << 40})));
  EXPECT_EQ(ints.as_tensor().as<int64_t>()[1], int64_t{1} << 40);
  EXPECT_EQ(ints.as_tensor().numel(), 2);
  // All of them in one message: each takes its own blob, and comes back with its own bytes.
  Message m = encoded(Value(all));
  EXPECT_EQ(m.blobs.size(), all.size());
  Value back = decode_whole(received(m));
  EXPECT_TRUE(back == Value(all));
  // Bytes that differ make a different tensor (equality does look at the bytes).
  Tensor other = tensor(ElementType::f32, {2, 3}, 99);
  EXPECT_FALSE(round_trip(Value(other)) == Value(tensor(ElementType::f32, {2, 3}, 1)));
}

TEST(CodecRoundTrip, SeveralValuesFollowOneAnotherInABody) {
  // A request's body is four values back to back: target, object, args, kwargs.
  Message m;
  encode(Value("add"), m);
  encode(Value(), m);
  encode(Value(Tuple{{1, tensor(ElementType::f32, {2})}}), m);
  encode(Value(Dict{{"scale", tensor(ElementType::i64, {3})}}), m);
  Message in = received(m);
  Reader r(in);
  EXPECT_EQ(decode(r).as_str(), "add");
  EXPECT_TRUE(decode(r).is_none());
  EXPECT_EQ(decode(r).as_tuple().items[1].as_tensor().shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(decode(r).at("scale").as_tensor().type, ElementType::i64);
  EXPECT_TRUE(r.at_end());
  EXPECT_THROW(decode(r), CodecError);  // nothing left
}

TEST(CodecRoundTrip, NestingUpToTheLimitIsCarriedAndBeyondItIsRefusedOnBothSides) {
  // n containers, one inside the other, the innermost holding `leaf` (or nothing).
  auto nested = [](int n, bool with_leaf) {
    Value v = with_leaf ? Value(List{1}) : Value(List{});
    for (int i = 1; i < n; ++i)
      v = (i % 3 == 0) ? Value(Dict{{"k", v}}) : (i % 3 == 1) ? Value(Tuple{{v}}) : Value(List{v});
    return v;
  };
  for (bool leaf : {true, false}) {
    Value ok = nested(kMaxDepth, leaf);
    EXPECT_TRUE(round_trip(ok) == ok);
    Value deep = nested(kMaxDepth + 1, leaf);
    EXPECT_THROW(encoded(deep), CodecError) << (leaf ? "with a leaf" : "empty innermost");
  }
}

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

// ---- The error body ------------------------------------------------------------------------

const WorkerInfo kWorker{.name = "worker1", .id = 1, .host = "vm", .pid = 4711};

TEST(ErrorBody, RoundTripsEveryField) {
  const ErrorBody bodies[] = {
      {ErrorCode::remote_exception, "ValueError", "bad value \xC3\xA9", "Traceback:\n  line 1", {}},
      {ErrorCode::unknown_function, "ad", "has no function 'ad'", "", {"add", "mul", "get_params"}},
      {ErrorCode::unknown_object, "opt.step", "serves no object 'opt'", "", {"add"}},
      {ErrorCode::malformed, "", "it ends 3 bytes short", "", {}},
      {ErrorCode::shutting_down, "", "", "", {}}};
  for (const ErrorBody& b : bodies) {
    ErrorBody back = decode_error(received(encode_error(b)));
    EXPECT_EQ(back.code, b.code);
    EXPECT_EQ(back.type, b.type);
    EXPECT_EQ(back.message, b.message);
    EXPECT_EQ(back.traceback, b.traceback);
    EXPECT_EQ(back.registered, b.registered);
  }
}

TEST(ErrorBody, IsATupleOfCodeTypeMessageTracebackAndNames) {
  // Written from error_body.h's layout, not by encode_error.
  Message m = message(raw({0x08}) + le32(5) + raw({0x03}) + le64(2) + raw({0x05}) + le32(1) + "f" +
                      raw({0x05}) + le32(2) + "no" + raw({0x05}) + le32(0) + raw({0x07}) + le32(1) +
                      raw({0x05}) + le32(1) + "g");
  ErrorBody b = decode_error(m);
  EXPECT_EQ(b.code, ErrorCode::unknown_function);
  EXPECT_EQ(b.type, "f");
  EXPECT_EQ(b.message, "no");
  EXPECT_EQ(b.registered, std::vector<std::string>{"g"});
  EXPECT_EQ(encode_error(b).body, m.body);
}

TEST(ErrorBody, TextThatIsNotUtf8IsReplacedNotSentBroken) {
  ErrorBody b{ErrorCode::remote_exception, "T\xFF", "message \xC3", "", {}};
  ErrorBody back = decode_error(encode_error(b));
  EXPECT_EQ(back.type, "(text that is not UTF-8)");
  EXPECT_EQ(back.message, "(text that is not UTF-8)");
}

TEST(ErrorBodyRejects, BodiesThatAreNotErrorBodies) {
  auto body = [](const Value& v) { return encoded(v); };
  EXPECT_THROW(decode_error(body(Value("oops"))), CodecError);
  EXPECT_THROW(decode_error(body(Value(Tuple{{1, "", "", ""}}))), CodecError);
  EXPECT_TRUE(contains(message_of<CodecError>([&] {
                         decode_error(body(Value(Tuple{{1, "", "", "", List{}, 1}})));
                       }),
                       "a tuple of 5"));
  for (int code : {0, 6, -1})
    EXPECT_TRUE(contains(message_of<CodecError>([&] {
                           decode_error(body(Value(Tuple{{code, "", "", "", List{}}})));
                         }),
                         "unknown error code " + std::to_string(code)));
  EXPECT_THROW(decode_error(body(Value(Tuple{{1, "", "", "", List{1}}}))), CodecError);
  Message trailing = body(Value(Tuple{{1, "", "", "", List{}}}));
  trailing.body += raw({0x00});
  EXPECT_TRUE(contains(message_of<CodecError>([&] { decode_error(trailing); }), "bytes after"));
  Message cut = body(Value(Tuple{{1, "T", "M", "", List{"a"}}}));
  for (size_t n = 0; n < cut.body.size(); ++n) {
    Message c = cut;
    c.body.resize(n);
    EXPECT_THROW(decode_error(c), CodecError) << n;
  }
}

template <class E>
E raised(const ErrorBody& b, const std::string& what = "rpc_sync('worker1', 'add')") {
  std::exception_ptr e = to_exception(b, kWorker, what);
  try {
    std::rethrow_exception(e);
  } catch (const E& err) {
    return err;
  } catch (const std::exception& other) {
    ADD_FAILURE() << "raised " << typeid(other).name() << ": " << other.what();
  }
  throw std::logic_error("unreachable");
}

TEST(ErrorBody, BecomesTheExceptionOfItsCodeNamingTheWorkerAndTheCall) {
  const std::string who = "worker1 (rank 1 on host vm, pid 4711)";
  const std::string call = "rpc_sync('worker1', 'add')";
  {
    auto e = raised<RemoteError>({ErrorCode::remote_exception, "ValueError", "negative", "tb", {}});
    EXPECT_EQ(e.type(), "ValueError");
    EXPECT_EQ(e.message(), "negative");
    EXPECT_EQ(e.traceback(), "tb");
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": it raised ValueError on " + who + ": negative");
    EXPECT_PRED2(contains, e.what(), "worker1's traceback:\ntb");
  }
  {
    auto e = raised<UnknownFunction>(
        {ErrorCode::unknown_function, "ad", "has no function 'ad'", "", {"add", "mul"}});
    EXPECT_EQ(e.function(), "ad");
    EXPECT_EQ(e.registered(), (std::vector<std::string>{"add", "mul"}));
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": " + who + " has no function 'ad'");
    EXPECT_PRED2(contains, e.what(), "it registered 2: add, mul");
  }
  {
    auto e = raised<UnknownFunction>(
        {ErrorCode::unknown_object, "opt.step", "serves no object 'opt'", "", {}});
    EXPECT_EQ(e.function(), "opt.step");
    EXPECT_PRED2(contains, e.what(), who + " serves no object 'opt'");
    EXPECT_PRED2(contains, e.what(), "it registered 0: nothing");
  }
  {
    auto e = raised<CodecError>({ErrorCode::malformed, "", "it ends 3 bytes short", "", {}});
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": " + who + " could not read the call: it ends 3");
  }
  {
    auto e = raised<ShutdownInProgress>({ErrorCode::shutting_down, "", "", "", {}});
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": " + who + " is shutting down");
  }
  // Not a RemoteError for the other codes: the classes are told apart.
  EXPECT_THROW(std::rethrow_exception(to_exception({ErrorCode::shutting_down}, kWorker, call)),
               ShutdownInProgress);
  try {
    std::rethrow_exception(to_exception({ErrorCode::malformed}, kWorker, call));
  } catch (const RemoteError&) {
    ADD_FAILURE() << "a malformed call became a RemoteError";
  } catch (const CodecError&) {
  }
}

TEST(ErrorBody, NameListsAreCapped) {
  EXPECT_EQ(name_list({}), "nothing");
  EXPECT_EQ(name_list({"a", "b"}), "a, b");
  EXPECT_EQ(name_list({"a", "b", "c", "d"}, 2), "a, b and 2 more");
}

}  // namespace
}  // namespace lockstep::rpc
