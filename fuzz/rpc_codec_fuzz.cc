// The RPC codec's decoder (src/rpc/codec.cc): what a worker makes of the body of a peer's request,
// reply or error frame, and of the tensors beside it, before any of it reaches a function.
//
// Input: a byte whose value modulo 5 is the number of blobs the frame brought, a byte for each
// blob's size (0 to 255 bytes, filled with a pattern), then the body. The body is decoded value
// after value, as a request's four values are. Checked: a malformed body is a CodecError and
// nothing else; every value that decodes encodes again (the encoder accepts all the decoder
// does), decodes back to the same value (floats bit for bit, tensors byte for byte), and
// encodes a second time to the very same bytes; a decoded tensor holds exactly its shape's bytes;
// operator== agrees, unequal only for a NaN.
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "lockstep/rpc/errors.h"
#include "lockstep/rpc/value.h"
#include "rpc/codec.h"
#include "rpc/message.h"

namespace {

using namespace lockstep::rpc;
using lockstep::fuzz::broken;

// Equal, with floats compared by their bits (NaN equals the same NaN, -0.0 differs from 0.0).
bool same(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  auto items = [](const std::vector<Value>& x, const std::vector<Value>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same(x[i], y[i])) return false;
    return true;
  };
  switch (a.kind()) {
    case Value::Kind::real: {
      double x = a.as_float(), y = b.as_float();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case Value::Kind::list:
      return items(a.as_list(), b.as_list());
    case Value::Kind::tuple:
      return items(a.as_tuple().items, b.as_tuple().items);
    case Value::Kind::dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!same(x[i].first, y[i].first) || !same(x[i].second, y[i].second)) return false;
      return true;
    }
    default:
      return a == b;
  }
}

bool has_nan(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::real:
      return v.as_float() != v.as_float();
    case Value::Kind::list:
      for (const Value& x : v.as_list())
        if (has_nan(x)) return true;
      return false;
    case Value::Kind::tuple:
      for (const Value& x : v.as_tuple().items)
        if (has_nan(x)) return true;
      return false;
    case Value::Kind::dict:
      for (const auto& [k, x] : v.as_dict())
        if (has_nan(k) || has_nan(x)) return true;
      return false;
    default:
      return false;
  }
}

// Every tensor in v holds exactly its shape's bytes, and its element count is representable.
void check_tensors(const Value& v, const Message& m) {
  switch (v.kind()) {
    case Value::Kind::tensor: {
      const Tensor& t = v.as_tensor();
      if (static_cast<int>(t.type) >= kElementTypes) broken("a tensor of an unknown element type");
      if (t.shape.size() > static_cast<size_t>(kMaxDims)) broken("a tensor past kMaxDims");
      const int64_t n = t.numel();  // UBSan: must not overflow
      if (n < 0 || static_cast<uint64_t>(n) * element_bytes(t.type) != t.nbytes)
        broken("a decoded tensor whose bytes are not its shape's");
      bool from_message = false;
      for (const Blob& b : m.blobs) from_message = from_message || b.data == t.data;
      if (!from_message) broken("a decoded tensor whose bytes are not one of the message's blobs");
      break;
    }
    case Value::Kind::list:
      for (const Value& x : v.as_list()) check_tensors(x, m);
      break;
    case Value::Kind::tuple:
      for (const Value& x : v.as_tuple().items) check_tensors(x, m);
      break;
    case Value::Kind::dict:
      for (const auto& [k, x] : v.as_dict()) {
        check_tensors(k, m);
        check_tensors(x, m);
      }
      break;
    default:
      break;
  }
}

std::string blob_bytes(const Message& m) {
  std::string s;
  for (const Blob& b : m.blobs) {
    s += std::to_string(b.nbytes) + ":";
    s.append(reinterpret_cast<const char*>(b.data), b.nbytes);
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t blobs = data[0] % 5;
  if (size < 1 + blobs) return 0;
  Message in;
  for (size_t i = 0; i < blobs; ++i) {
    Blob b = allocate_blob(data[1 + i]);
    auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(b.data));
    for (size_t j = 0; j < b.nbytes; ++j) p[j] = static_cast<unsigned char>(j * 7 + i + 1);
    in.blobs.push_back(std::move(b));
  }
  in.body.assign(reinterpret_cast<const char*>(data + 1 + blobs), size - 1 - blobs);

  // What decodes, up to the end or the first malformed byte.
  std::vector<Value> values;
  try {
    Reader r(in);
    while (!r.at_end()) values.push_back(decode(r));
  } catch (const CodecError&) {
  }
  if (values.empty()) return 0;

  Message again;
  for (const Value& v : values) {
    check_tensors(v, in);
    (void)describe(v, 100);
    try {
      encode(v, again);
    } catch (const CodecError& e) {
      broken(std::string("a decoded value does not encode: ") + e.what());
    }
  }
  std::vector<Value> back;
  try {
    Reader r(again);
    for (size_t i = 0; i < values.size(); ++i) back.push_back(decode(r));
    if (!r.at_end()) broken("re-encoded values decode with bytes left over");
  } catch (const CodecError& e) {
    broken(std::string("re-encoded values do not decode: ") + e.what());
  }
  Message third;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!same(values[i], back[i])) broken("a value changed through encode and decode");
    if ((values[i] == back[i]) == has_nan(values[i]))
      broken("operator== disagrees with a bitwise comparison");
    encode(back[i], third);
  }
  if (third.body != again.body || blob_bytes(third) != blob_bytes(again))
    broken("encoding a value twice gave different bytes");
  return 0;
}
