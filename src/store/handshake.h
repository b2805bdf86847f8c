// The handshake bytes that open a TcpStore connection (the format is in store/protocol.h), as
// pure functions of the bytes: the connections move bytes and make nonces, these read and write
// the hellos and proofs, so that the parsing can be tested (and fuzzed: fuzz/) without sockets.
#pragma once

#include <string>
#include <string_view>

#include "net/auth.h"

namespace lockstep::store_proto {

// The server's side: reads the client's hello, then its proof, from the byte stream.
class ClientHandshakeReader {
 public:
  enum class Result { need_more, hello, proof, bad_prefix };

  // Consumes bytes from [*p, end) up to the end of the hello or proof being read, advancing *p.
  // hello: client_nonce() is set; the proof comes next. proof: proof() is set and the handshake
  // is over (the bytes after it are requests). bad_prefix: the bytes are not a lockstep store
  // client's hello (checked byte by byte as they come, so a stray client is dropped at once); the
  // stream is dead and every later call says so again.
  Result feed(const char** p, const char* end);

  const auth::Nonce& client_nonce() const { return client_nonce_; }
  const auth::Proof& proof() const { return proof_; }
  // The proof has been read.
  bool done() const { return stage_ == Stage::done; }
  // Still reading the hello (not yet the proof), and how many bytes of the one being read have
  // arrived: for the message that drops a client too slow to finish.
  bool reading_hello() const { return stage_ == Stage::hello; }
  size_t have() const { return in_.size(); }

 private:
  enum class Stage { hello, proof, done, bad } stage_ = Stage::hello;
  std::string in_;  // the hello or proof so far
  auth::Nonce client_nonce_{};
  auth::Proof proof_{};
};

// The server's hello (kServerHelloBytes): the handshake, the flags (kSecretRequired when it has a
// secret), its nonce and its proof (zeros without a secret).
std::string server_hello(bool has_secret, const auth::Nonce& nonce, const auth::Proof& proof);

// The client's side: checks the server's hello at the start of `hello` (which must hold at least
// kServerHelloBytes) against this process's secret ("" for none) and nonce, and returns the
// server's nonce. `where` is "lockstep store server at host:port", for the errors. NetworkError
// when the bytes are not a lockstep store server's hello (or `hello` is too short); AuthError
// when only one side has a secret, or the server's proof does not match this secret.
auth::Nonce check_server_hello(std::string_view hello, std::string_view secret,
                               const auth::Nonce& mine, const std::string& where);

}  // namespace lockstep::store_proto
