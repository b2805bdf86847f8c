// The RPC codec (src/rpc/codec.h): the exact bytes of a value's encoding, written out by hand from
// the format in codec.h, and round trips of every kind of Value through bytes received as a peer
// would receive them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "lockstep/rpc/rpc.h"
#include "rpc/codec.h"
#include "rpc/codec_fixtures.h"
#include "support/messages.h"

namespace lockstep::rpc {
namespace {

using lockstep::testing::contains;
using lockstep::testing::message_of;

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

}  // namespace
}  // namespace lockstep::rpc
