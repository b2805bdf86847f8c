// What the codec tests share (codec_test.cc, codec_reject_test.cc, error_body_test.cc): messages
// as a peer receives them, decoding a whole body, and the CodecError a body gets.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "rpc/codec.h"
#include "rpc/wire_bytes.h"
#include "support/messages.h"

namespace lockstep::rpc {

inline Message message(std::string body, std::vector<Blob> blobs = {}) {
  Message m;
  m.body = std::move(body);
  m.blobs = std::move(blobs);
  return m;
}

inline Message encoded(const Value& v) {
  Message m;
  encode(v, m);
  return m;
}

// What the peer holds after the frame arrives: the same body, and each blob's bytes copied into
// memory of its own (so that nothing compares equal just because it is the sender's memory).
inline Message received(const Message& sent) {
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
inline Value decode_whole(const Message& m) {
  Reader r(m);
  Value v = decode(r);
  if (!r.at_end())
    ADD_FAILURE() << "the decoder stopped at byte " << r.offset() << " of " << m.body.size();
  return v;
}

inline Value round_trip(const Value& v) {
  return decode_whole(received(encoded(v)));
}

// The CodecError's message for decoding m (a failure when it decodes).
inline std::string refusal(const Message& m) {
  return testing::message_of<CodecError>([&] {
    Reader r(m);
    (void)decode(r);
  });
}
inline std::string refusal(const std::string& body, std::vector<Blob> blobs = {}) {
  return refusal(message(body, std::move(blobs)));
}

// A tensor of its own bytes, filled with a pattern.
inline Tensor tensor(ElementType type, std::vector<int64_t> shape, int seed = 0) {
  Tensor t = Tensor::zeros(type, std::move(shape));
  auto* p = t.mutable_as<unsigned char>();
  for (size_t i = 0; i < t.nbytes; ++i) p[i] = static_cast<unsigned char>(i * 13 + seed + 5);
  return t;
}

// A tensor header as codec.h lays it out.
inline std::string tensor_head(int type, std::vector<int64_t> shape, uint32_t blob) {
  std::string s = raw({0x0A, type, static_cast<int>(shape.size())});
  for (int64_t d : shape) s += le64(static_cast<uint64_t>(d));
  return s + le32(blob);
}

}  // namespace lockstep::rpc
