// The TcpStore server's side of a connection (src/store/server_connection.cc,
// tcp_store_server.cc): the client's hello and proof (store_proto::ClientHandshakeReader), then
// requests (store_proto::MessageParser), each handled by the key-value service (StoreService) as
// the server thread does, with the stream cut into reads wherever a socket could cut it.
//
// Input: a byte for the read size, a byte whose low bit gives the server a secret, then the
// client's byte stream. Checked: every request the parser completes is well formed and within
// its bounds, encoding it gives it back unchanged, and every reply the service sends parses on
// the client's side.
#include <algorithm>

#include "fuzz_input.h"
#include "net/auth.h"
#include "store/handshake.h"
#include "store/protocol.h"
#include "store/store_service.h"

namespace {

namespace sp = lockstep::store_proto;
namespace auth = lockstep::auth;
using lockstep::fuzz::broken;

constexpr std::string_view kSecret = "fuzz-secret";

sp::Message parse_whole(const std::string& bytes, sp::Direction direction) {
  sp::MessageParser parser(direction);
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  if (parser.feed(&p, end) != sp::MessageParser::Result::complete || p != end)
    broken("an encoded message does not parse back: " + parser.error());
  return parser.take();
}

bool same(const sp::Message& a, const sp::Message& b) {
  return a.code == b.code && a.number == b.number && a.strings == b.strings;
}

void check_request(const sp::Message& m) {
  if (!sp::valid_request_shape(m.code, static_cast<uint32_t>(m.strings.size())))
    broken("the parser completed a malformed request");
  for (const auto& s : m.strings)
    if (s.size() > sp::kMaxValueBytes) broken("a request string beyond every bound");
  std::string bytes;
  sp::encode(m, bytes);
  if (!same(parse_whole(bytes, sp::Direction::request), m))
    broken("a request changed through encode and parse");
}

// One connection as the server keeps it: the handshake, then the request parser.
struct Connection {
  uint64_t id;
  bool secret;
  sp::ClientHandshakeReader handshake;
  bool accepted = false;
  bool dead = false;
  sp::MessageParser parser{sp::Direction::request};
};

// ServerConnection::check_handshake, with a fixed server nonce (the run must be repeatable).
void read_handshake(Connection& c, const char** p, const char* end) {
  const auth::Nonce server_nonce{};
  while (!c.accepted && !c.dead && *p < end) {
    switch (c.handshake.feed(p, end)) {
      case sp::ClientHandshakeReader::Result::need_more:
        break;
      case sp::ClientHandshakeReader::Result::bad_prefix:
        c.dead = true;
        break;
      case sp::ClientHandshakeReader::Result::hello:
        if (c.secret)
          (void)auth::prove(kSecret, auth::Role::server, c.handshake.client_nonce(), server_nonce);
        break;
      case sp::ClientHandshakeReader::Result::proof:
        c.dead = c.secret && !auth::check(kSecret, auth::Role::client, server_nonce,
                                          c.handshake.client_nonce(), c.handshake.proof());
        c.accepted = !c.dead;
        break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t step = lockstep::fuzz::read_size(data[0]);
  Connection conn{.id = 1, .secret = (data[1] & 1) != 0};
  const std::string_view stream = lockstep::fuzz::as_text(data + 2, size - 2);
  lockstep::store_detail::StoreService service([](uint64_t, const sp::Message& reply) {
    std::string bytes;
    sp::encode(reply, bytes);
    if (!same(parse_whole(bytes, sp::Direction::reply), reply))
      broken("a reply changed through encode and parse");
  });
  for (size_t at = 0; at < stream.size() && !conn.dead;) {
    const size_t n = step == 0 ? stream.size() - at : std::min(step, stream.size() - at);
    const char* p = stream.data() + at;
    const char* end = p + n;
    at += n;
    read_handshake(conn, &p, end);
    while (p < end && !conn.dead) {  // ServerConnection::consume
      const auto result = conn.parser.feed(&p, end);
      if (result == sp::MessageParser::Result::invalid) {
        if (conn.parser.error().empty()) broken("an invalid message without a reason");
        conn.dead = true;
      } else if (result == sp::MessageParser::Result::complete) {
        sp::Message request = conn.parser.take();
        check_request(request);
        if (service.parked(conn.id)) {  // a request before the last was answered: dropped
          service.forget(conn.id);
          conn.dead = true;
        } else {
          service.handle(conn.id, std::move(request));
        }
      }
    }
  }
  return 0;
}
