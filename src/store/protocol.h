// The TcpStore wire format, shared by the server and the client.
//
// A connection opens with a handshake that also authenticates both sides (src/net/auth.h):
//   client hello (40 B): kMagic, kProtocolVersion (two little-endian u32), the client's nonce;
//   server hello (76 B): kMagic, kProtocolVersion, flags (u32: kSecretRequired), the server's
//                        nonce, the server's proof (zeros when it has no secret);
//   client proof (32 B): the client's proof (zeros when it has no secret).
// A server drops a connection whose first bytes differ (a port scanner, `GET / HTTP/1.1`), or,
// when it has a secret, whose proof is wrong; it answers nothing before the proof. A client
// checks the server's proof before it sends its own, so a server without the secret learns
// nothing, and a client without it gets a clear AuthError instead of a dropped connection.
//
// After that every request and every reply is one Message:
//   u8 code | i64 number | u32 count | count x (u64 length | length bytes)
// all little-endian. In a request, code is a Command and number is the timeout in ms of a
// blocking call (get, wait, multi_get) or the delta of add. In a reply, code is a Status and
// number is an integer result (add, check, delete_key, num_keys). Each string's length is checked
// against its bound (kMaxKeyBytes for keys, kMaxValueBytes for values) as soon as the length
// arrives, before anything is allocated; count is bounded by kMaxStringsPerMessage. A client sends
// one request and reads its reply before sending the next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::store_proto {

inline constexpr uint32_t kMagic = 0x54534b4c;  // "LKST" on the wire
// The longest key and value a TcpStore carries (a longer one is InvalidArgument on the client,
// and drops the connection on the server).
inline constexpr size_t kMaxKeyBytes = 64 * 1024;
inline constexpr size_t kMaxValueBytes = 256 * 1024 * 1024;
inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr size_t kHandshakeBytes = 8;  // kMagic and kProtocolVersion
inline constexpr size_t kClientHelloBytes = kHandshakeBytes + 32;
inline constexpr size_t kServerHelloBytes = kHandshakeBytes + 4 + 32 + 32;
inline constexpr size_t kClientProofBytes = 32;
inline constexpr uint32_t kSecretRequired = 1;  // server hello flag
inline constexpr size_t kHeaderBytes = 1 + 8 + 4;
// At most this many keys in one request (a multi_set carries two strings per key).
inline constexpr uint32_t kMaxKeysPerRequest = 1 << 16;
inline constexpr uint32_t kMaxStringsPerMessage = 2 * kMaxKeysPerRequest;

enum class Command : uint8_t {
  set = 1,
  get,
  add,
  compare_set,
  check,
  wait,
  delete_key,
  num_keys,
  multi_get,
  multi_set,
};

enum class Status : uint8_t { ok = 0, timed_out = 1, error = 2 };

struct Message {
  uint8_t code = 0;
  int64_t number = 0;
  std::vector<std::string> strings;
};

// The 8 bytes that open both hellos.
std::string handshake_bytes();
// Little-endian u32 at p.
uint32_t get_u32(const char* p);
// Appends v as a little-endian u32.
void put_u32(std::string& out, uint32_t v);
// Appends the encoding of m to out.
void encode(const Message& m, std::string& out);

// Which messages a parser accepts: requests (checked per command) or replies.
enum class Direction { request, reply };

// Parses a byte stream into Messages, a piece at a time. Memory grows only with bytes actually
// received (never with a length field that has not been backed by data).
class MessageParser {
 public:
  enum class Result { need_more, complete, invalid };

  explicit MessageParser(Direction direction) : direction_(direction) {}
  // Consumes bytes from [*p, end) up to the end of one message, advancing *p. complete: take()
  // the message. invalid: error() says why; the stream cannot be resynchronised.
  Result feed(const char** p, const char* end);
  Message take();
  const std::string& error() const { return error_; }
  // Whether part of a message has arrived.
  bool mid_message() const { return state_ != State::header || have_ > 0; }

 private:
  enum class State { header, length, body };
  bool fill_fixed(const char** p, const char* end, size_t want);
  Result on_header();
  Result on_length();
  Result next_string_or_done();
  Result fail(std::string why);
  size_t bound(size_t index) const;

  Direction direction_;
  State state_ = State::header;
  unsigned char fixed_[kHeaderBytes] = {};
  size_t have_ = 0;
  uint32_t count_ = 0;
  uint64_t body_left_ = 0;
  Message message_;
  std::string error_;
};

// A request with this command and string count is well formed (not checking the bounds).
bool valid_request_shape(uint8_t code, uint32_t count);
// Readable name of a command code, for errors.
const char* command_name(uint8_t code);

}  // namespace lockstep::store_proto
