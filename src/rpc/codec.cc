#include "rpc/codec.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "lockstep/rpc/errors.h"

namespace lockstep::rpc {

namespace {

template <class T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

// The bytes a tensor of this shape needs; false on a negative dimension, or when the bytes of
// its nonzero dimensions pass int64: whatever their order, and even beside a 0 (an empty tensor
// of [2^62, 2, 0] would otherwise pass, and its numel() overflow).
bool tensor_bytes(ElementType type, const std::vector<int64_t>& shape, size_t& out) {
  uint64_t n = element_bytes(type);
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0)
      empty = true;
    else if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) ||
             n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
  }
  out = empty ? 0 : static_cast<size_t>(n);
  return true;
}

// Room set aside for a container's items before they are read. A count is checked only against
// the bytes left, which the containers around it count too: reserving all of it at every level
// would set aside up to kMaxDepth Values per byte of body, for items that need not be there.
constexpr size_t kReserveItems = 1024;

}  // namespace

void Writer::integer(int64_t i) {
  tag(Tag::integer);
  put(out_.body, i);
}

void Writer::real(double d) {
  tag(Tag::real);
  put(out_.body, d);
}

void Writer::header(Tag t, size_t n) {
  if (n > std::numeric_limits<uint32_t>::max())
    throw CodecError(detail::concat("rpc: a ", tag_name(static_cast<uint8_t>(t)), " of ", n,
                                    " items is more than one message carries (2^32 - 1)"));
  tag(t);
  put(out_.body, static_cast<uint32_t>(n));
}

void Writer::str(std::string_view s) {
  header(Tag::str, s.size());
  out_.body.append(s);
}

void Writer::bytes(std::string_view b) {
  header(Tag::bytes, b.size());
  out_.body.append(b);
}

void Writer::tensor(ElementType type, const std::vector<int64_t>& shape, Blob blob) {
  if (static_cast<int>(type) >= kElementTypes)
    throw CodecError(detail::concat("rpc: unknown tensor element type ", static_cast<int>(type)));
  if (shape.size() > kMaxDims)
    throw CodecError(detail::concat("rpc: a tensor of ", shape.size(),
                                    " dimensions; the codec carries at most ", kMaxDims));
  size_t want = 0;
  if (!tensor_bytes(type, shape, want) || want != blob.nbytes)
    throw CodecError(detail::concat("rpc: a tensor's ", blob.nbytes, " bytes do not match its ",
                                    element_name(type), " shape"));
  if (out_.blobs.size() >= std::numeric_limits<uint32_t>::max())
    throw CodecError("rpc: too many tensors in one message");
  tag(Tag::tensor);
  out_.body.push_back(static_cast<char>(type));
  out_.body.push_back(static_cast<char>(shape.size()));
  for (int64_t d : shape) put(out_.body, d);
  put(out_.body, static_cast<uint32_t>(out_.blobs.size()));
  out_.blobs.push_back(std::move(blob));
}

Reader::Reader(const Message& message, size_t offset)
    : m_(message), pos_(offset), end_(message.body.size()), used_blobs_(message.blobs.size()) {
  if (pos_ > end_) fail("offset past the body");
}

void Reader::fail(const std::string& what) const {
  throw CodecError(
      detail::concat("rpc: malformed message body at byte ", pos_, " of ", end_, ": ", what));
}

void Reader::need(size_t n) const {
  if (end_ - pos_ < n)
    fail(detail::concat("it ends ", n - (end_ - pos_), " bytes short of the value there"));
}

uint8_t Reader::byte() {
  need(1);
  return static_cast<uint8_t>(m_.body[pos_++]);
}

uint32_t Reader::u32() {
  need(4);
  uint32_t v;
  std::memcpy(&v, m_.body.data() + pos_, 4);
  pos_ += 4;
  return v;
}

uint64_t Reader::u64() {
  need(8);
  uint64_t v;
  std::memcpy(&v, m_.body.data() + pos_, 8);
  pos_ += 8;
  return v;
}

Tag Reader::peek() const {
  need(1);
  uint8_t t = static_cast<uint8_t>(m_.body[pos_]);
  if (t > static_cast<uint8_t>(Tag::tensor)) fail(detail::concat("unknown ", tag_name(t)));
  return static_cast<Tag>(t);
}

namespace {
void expect(Reader& r, Tag got, Tag want) {
  if (got != want)
    r.fail(detail::concat("expected ", tag_name(static_cast<uint8_t>(want)), ", found ",
                          tag_name(static_cast<uint8_t>(got))));
}
}  // namespace

void Reader::none() {
  expect(*this, peek(), Tag::none);
  ++pos_;
}

bool Reader::boolean() {
  Tag t = peek();
  if (t != Tag::true_ && t != Tag::false_) expect(*this, t, Tag::true_);
  ++pos_;
  return t == Tag::true_;
}

int64_t Reader::integer() {
  expect(*this, peek(), Tag::integer);
  ++pos_;
  return static_cast<int64_t>(u64());
}

double Reader::real() {
  expect(*this, peek(), Tag::real);
  ++pos_;
  uint64_t bits = u64();
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

size_t Reader::count(Tag t, size_t min_item_bytes) {
  expect(*this, peek(), t);
  ++pos_;
  uint32_t n = u32();
  // Every item takes at least min_item_bytes, so a count the body cannot hold is a lie that
  // would otherwise make the reader reserve room for it.
  if (min_item_bytes > 0 && n > (end_ - pos_) / min_item_bytes)
    fail(detail::concat("a ", tag_name(static_cast<uint8_t>(t)), " of ", n,
                        " items, more than the ", end_ - pos_, " bytes left can hold"));
  return n;
}

std::string_view Reader::str() {
  size_t n = count(Tag::str, 1);
  std::string_view s(m_.body.data() + pos_, n);
  if (!is_utf8(s)) fail("a str that is not UTF-8");
  pos_ += n;
  return s;
}

std::string_view Reader::bytes() {
  size_t n = count(Tag::bytes, 1);
  std::string_view s(m_.body.data() + pos_, n);
  pos_ += n;
  return s;
}

size_t Reader::list() {
  return count(Tag::list, 1);
}
size_t Reader::tuple() {
  return count(Tag::tuple, 1);
}
size_t Reader::dict() {
  return count(Tag::dict, 2);
}

void Reader::enter() {
  if (++depth_ > kMaxDepth) fail(detail::concat("nesting deeper than ", kMaxDepth));
}

Reader::TensorHead Reader::tensor() {
  expect(*this, peek(), Tag::tensor);
  ++pos_;
  uint8_t type = byte();
  if (type >= kElementTypes) fail(detail::concat("unknown tensor element type ", int(type)));
  uint8_t ndim = byte();
  if (ndim > kMaxDims) fail(detail::concat("a tensor of ", int(ndim), " dimensions"));
  TensorHead head{static_cast<ElementType>(type), std::vector<int64_t>(ndim), nullptr};
  for (auto& d : head.shape) d = static_cast<int64_t>(u64());
  uint32_t index = u32();
  if (index >= m_.blobs.size())
    fail(detail::concat("tensor bytes #", index, " of a message that has ", m_.blobs.size()));
  if (used_blobs_[index]) fail(detail::concat("tensor bytes #", index, " used twice"));
  used_blobs_[index] = true;
  size_t want = 0;
  if (!tensor_bytes(head.type, head.shape, want))
    fail("a tensor shape with a negative or overflowing size");
  if (want != m_.blobs[index].nbytes)
    fail(detail::concat("a tensor of ", want, " bytes whose bytes #", index, " are ",
                        m_.blobs[index].nbytes));
  head.blob = &m_.blobs[index];
  return head;
}

namespace {

void encode_at(const Value& v, Writer& w, int depth) {
  // As the decoder counts: each list, tuple or dict is one level, and kMaxDepth levels are fine.
  const bool container = v.kind() == Value::Kind::list || v.kind() == Value::Kind::tuple ||
                         v.kind() == Value::Kind::dict;
  if (container && depth >= kMaxDepth)
    throw CodecError(detail::concat("rpc: a value nested deeper than ", kMaxDepth));
  switch (v.kind()) {
    case Value::Kind::none:
      w.none();
      break;
    case Value::Kind::boolean:
      w.boolean(v.as_bool());
      break;
    case Value::Kind::integer:
      w.integer(v.as_int());
      break;
    case Value::Kind::real:
      w.real(v.as_float());
      break;
    case Value::Kind::str:
      if (!is_utf8(v.as_str())) throw CodecError("rpc: a str that is not UTF-8 (use Bytes)");
      w.str(v.as_str());
      break;
    case Value::Kind::bytes:
      w.bytes(v.as_bytes().data);
      break;
    case Value::Kind::list:
      w.list(v.as_list().size());
      for (const Value& item : v.as_list()) encode_at(item, w, depth + 1);
      break;
    case Value::Kind::tuple:
      w.tuple(v.as_tuple().items.size());
      for (const Value& item : v.as_tuple().items) encode_at(item, w, depth + 1);
      break;
    case Value::Kind::dict:
      w.dict(v.as_dict().size());
      for (const auto& [key, value] : v.as_dict()) {
        encode_at(key, w, depth + 1);
        encode_at(value, w, depth + 1);
      }
      break;
    case Value::Kind::tensor: {
      const Tensor& t = v.as_tensor();
      w.tensor(t.type, t.shape, Blob{t.data, t.nbytes, t.owner});
      break;
    }
  }
}

}  // namespace

void encode(const Value& value, Message& out) {
  Writer w(out);
  encode_at(value, w, 0);
}

Value decode(Reader& in) {
  switch (in.peek()) {
    case Tag::none:
      in.none();
      return Value();
    case Tag::false_:
    case Tag::true_:
      return Value(in.boolean());
    case Tag::integer:
      return Value(in.integer());
    case Tag::real:
      return Value(in.real());
    case Tag::str:
      return Value(std::string(in.str()));
    case Tag::bytes:
      return Value(Bytes{std::string(in.bytes())});
    case Tag::list:
    case Tag::tuple: {
      bool is_list = in.peek() == Tag::list;
      size_t n = is_list ? in.list() : in.tuple();
      in.enter();
      std::vector<Value> items;
      items.reserve(std::min(n, kReserveItems));
      for (size_t i = 0; i < n; ++i) items.push_back(decode(in));
      in.leave();
      return is_list ? Value(List(std::move(items))) : Value(Tuple{std::move(items)});
    }
    case Tag::dict: {
      size_t n = in.dict();
      in.enter();
      Dict d;
      d.reserve(std::min(n, kReserveItems));
      for (size_t i = 0; i < n; ++i) {
        Value k = decode(in);
        d.emplace_back(std::move(k), decode(in));
      }
      in.leave();
      return Value(std::move(d));
    }
    case Tag::tensor: {
      Reader::TensorHead h = in.tensor();
      Tensor t{h.type, std::move(h.shape), h.blob->data, h.blob->nbytes, h.blob->owner};
      return Value(std::move(t));
    }
  }
  in.fail("unreachable tag");
}

bool is_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (e - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    p += n + 1;
  }
  return true;
}

std::string tag_name(uint8_t tag) {
  static const char* const names[] = {"None",  "bool", "bool",  "int",  "float", "str",
                                      "bytes", "list", "tuple", "dict", "tensor"};
  if (tag < sizeof names / sizeof names[0]) return names[tag];
  char buf[16];
  std::snprintf(buf, sizeof buf, "tag 0x%02x", tag);
  return buf;
}

}  // namespace lockstep::rpc
