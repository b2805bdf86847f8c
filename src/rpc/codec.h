// The codec: how Values (lockstep/rpc/value.h) become a message body and back. One tag byte per
// value, little-endian fixed-width numbers, counts before contents:
//
//   none 0 | false 1 | true 2 | int 3 i64 | float 4 f64 | str 5 u32 len, UTF-8 | bytes 6 u32 len
//   list 7 u32 n, n values | tuple 8 u32 n, n values | dict 9 u32 n, n (key, value) pairs
//   tensor 10 u8 element type, u8 ndim, ndim × i64 dims, u32 blob index
//
// Decoding trusts nothing: every count is checked against the bytes left, nesting is at most
// kMaxDepth, text must be UTF-8, a tensor's blob must exist, be used once, and hold exactly its
// shape's bytes. Any violation is a CodecError naming the offset, never a crash or a huge
// allocation. Writer and Reader are the primitives; the C++ Value tree and Python's objects
// (src/c10d/rpc_codec.cc) both go through them, so the two agree byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/rpc/value.h"
#include "rpc/message.h"

namespace lockstep::rpc {

enum class Tag : uint8_t {
  none = 0,
  false_ = 1,
  true_ = 2,
  integer = 3,
  real = 4,
  str = 5,
  bytes = 6,
  list = 7,
  tuple = 8,
  dict = 9,
  tensor = 10
};
inline constexpr int kMaxDepth = 64;
inline constexpr int kMaxDims = 16;

class Writer {
 public:
  explicit Writer(Message& out) : out_(out) {}
  void none() { tag(Tag::none); }
  void boolean(bool b) { tag(b ? Tag::true_ : Tag::false_); }
  void integer(int64_t i);
  void real(double d);
  void str(std::string_view s);  // the caller vouches that s is UTF-8
  void bytes(std::string_view b);
  void list(size_t n) { header(Tag::list, n); }
  void tuple(size_t n) { header(Tag::tuple, n); }
  void dict(size_t n) { header(Tag::dict, n); }
  // A tensor whose bytes are `blob` (its nbytes must be the shape's).
  void tensor(ElementType type, const std::vector<int64_t>& shape, Blob blob);

 private:
  void tag(Tag t) { out_.body.push_back(static_cast<char>(t)); }
  void header(Tag t, size_t n);
  Message& out_;
};

class Reader {
 public:
  // Reads `message`'s body from `offset`.
  explicit Reader(const Message& message, size_t offset = 0);
  // The next value's tag, without consuming it. CodecError at the end.
  Tag peek() const;
  bool at_end() const { return pos_ == end_; }
  size_t offset() const { return pos_; }

  // Each consumes one value of that tag (CodecError, naming what was found, otherwise).
  void none();
  bool boolean();
  int64_t integer();
  double real();
  std::string_view str();  // checked UTF-8
  std::string_view bytes();
  size_t list();  // the count; the items follow
  size_t tuple();
  size_t dict();  // the count of pairs
  struct TensorHead {
    ElementType type;
    std::vector<int64_t> shape;
    const Blob* blob;
  };
  TensorHead tensor();

  // Nesting guards for container readers: enter() throws past kMaxDepth.
  void enter();
  void leave() { --depth_; }

  [[noreturn]] void fail(const std::string& what) const;

 private:
  uint8_t byte();
  uint32_t u32();
  uint64_t u64();
  void need(size_t n) const;
  size_t count(Tag t, size_t min_item_bytes);
  const Message& m_;
  size_t pos_, end_;
  int depth_ = 0;
  std::vector<bool> used_blobs_;
};

// A Value's encoding, appended to `out`. CodecError for a str that is not UTF-8, a tensor
// whose bytes do not match its shape, or nesting past kMaxDepth.
void encode(const Value& value, Message& out);
// The next value of `in`.
Value decode(Reader& in);

// Whether s is well-formed UTF-8.
bool is_utf8(std::string_view s);
// The tag's name, for messages: "int", "tensor", ... ("tag 0x2a" for unknown bytes).
std::string tag_name(uint8_t tag);

}  // namespace lockstep::rpc
