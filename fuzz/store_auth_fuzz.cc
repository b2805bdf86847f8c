// The authenticated handshake of a TcpStore connection (protocol v2, store/protocol.h and
// net/auth.h), from both sides: the client checking the server's hello
// (store_proto::check_server_hello), and the server reading the client's hello and proof
// (store_proto::ClientHandshakeReader, then auth::check).
//
// Input: a byte whose bit 0 picks the side (0: client, 1: server), bit 1 gives that side a
// secret, and bits 2-7 the read size of the server side; then the peer's bytes. Checked: a hello
// is either accepted or a NetworkError/AuthError; an accepted one really starts with the
// handshake and agrees about the secret; and the hello a server with the same secret would send
// for the input's nonce is always accepted.
#include <cstring>

#include "fuzz_input.h"
#include "lockstep/core/error.h"
#include "net/auth.h"
#include "store/handshake.h"
#include "store/protocol.h"

namespace {

namespace sp = lockstep::store_proto;
namespace auth = lockstep::auth;
using lockstep::fuzz::broken;

constexpr std::string_view kSecret = "fuzz-secret";
const std::string kWhere = "lockstep store server at fuzz:1";

void client_side(std::string_view hello, std::string_view secret) {
  const auth::Nonce mine{1, 2, 3};  // fixed: the run must be repeatable
  try {
    sp::check_server_hello(hello, secret, mine, kWhere);
    if (hello.size() < sp::kServerHelloBytes || hello.substr(0, 8) != sp::handshake_bytes())
      broken("a hello without the handshake was accepted");
    const bool flagged = (sp::get_u32(hello.data() + 8) & sp::kSecretRequired) != 0;
    if (flagged != !secret.empty()) broken("a hello that disagrees about the secret was accepted");
  } catch (const lockstep::NetworkError&) {
  } catch (const lockstep::AuthError&) {
  }
  // What a server with the same secret sends for the nonce in the input must pass.
  auth::Nonce theirs{};
  std::memcpy(theirs.data(), hello.data(), std::min(hello.size(), theirs.size()));
  const auth::Proof proof =
      secret.empty() ? auth::Proof{} : auth::prove(secret, auth::Role::server, mine, theirs);
  const auth::Nonce got = sp::check_server_hello(sp::server_hello(!secret.empty(), theirs, proof),
                                                 secret, mine, kWhere);
  if (got != theirs) broken("check_server_hello returned another nonce than the hello's");
}

void server_side(std::string_view stream, std::string_view secret, size_t step) {
  sp::ClientHandshakeReader reader;
  const auth::Nonce server_nonce{4, 5, 6};
  for (size_t at = 0; at < stream.size() && !reader.done();) {
    const size_t n = step == 0 ? stream.size() - at : std::min(step, stream.size() - at);
    const char* p = stream.data() + at;
    const char* end = p + n;
    while (p < end && !reader.done()) {
      switch (reader.feed(&p, end)) {
        case sp::ClientHandshakeReader::Result::need_more:
          if (p != end) broken("need_more with bytes left");
          break;
        case sp::ClientHandshakeReader::Result::bad_prefix:
          if (stream.substr(0, 8) ==
              sp::handshake_bytes().substr(0, std::min<size_t>(8, stream.size())))
            broken("a good handshake prefix was refused");
          return;
        case sp::ClientHandshakeReader::Result::hello:
          if (std::memcmp(reader.client_nonce().data(), stream.data() + 8, 32) != 0)
            broken("the client's nonce is not the 32 bytes after the handshake");
          break;
        case sp::ClientHandshakeReader::Result::proof:
          if (!secret.empty())
            (void)auth::check(secret, auth::Role::client, server_nonce, reader.client_nonce(),
                              reader.proof());
          break;
      }
    }
    at = static_cast<size_t>(p - stream.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view secret = (data[0] & 2) != 0 ? kSecret : std::string_view();
  const std::string_view peer = lockstep::fuzz::as_text(data + 1, size - 1);
  if ((data[0] & 1) == 0)
    client_side(peer, secret);
  else
    server_side(peer, secret, lockstep::fuzz::read_size(data[0] >> 2));
  return 0;
}
