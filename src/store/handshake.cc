#include "store/handshake.h"

#include <algorithm>
#include <cstring>

#include "lockstep/core/error.h"
#include "store/protocol.h"

namespace lockstep::store_proto {

ClientHandshakeReader::Result ClientHandshakeReader::feed(const char** p, const char* end) {
  static const std::string kPrefix = handshake_bytes();
  if (stage_ == Stage::bad) return Result::bad_prefix;
  if (stage_ == Stage::done) return Result::need_more;
  const size_t want = stage_ == Stage::hello ? kClientHelloBytes : kClientProofBytes;
  const size_t take = std::min<size_t>(want - in_.size(), end - *p);
  in_.append(*p, take);
  *p += take;
  if (stage_ == Stage::hello) {
    const size_t n = std::min(in_.size(), kPrefix.size());
    if (kPrefix.compare(0, n, in_, 0, n) != 0) {
      stage_ = Stage::bad;
      return Result::bad_prefix;
    }
  }
  if (in_.size() < want) return Result::need_more;
  if (stage_ == Stage::hello) {
    std::memcpy(client_nonce_.data(), in_.data() + kHandshakeBytes, client_nonce_.size());
    stage_ = Stage::proof;
    in_.clear();
    return Result::hello;
  }
  std::memcpy(proof_.data(), in_.data(), proof_.size());
  stage_ = Stage::done;
  in_.clear();
  return Result::proof;
}

std::string server_hello(bool has_secret, const auth::Nonce& nonce, const auth::Proof& proof) {
  std::string out = handshake_bytes();
  put_u32(out, has_secret ? kSecretRequired : 0);
  out.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  return out;
}

auth::Nonce check_server_hello(std::string_view hello, std::string_view secret,
                               const auth::Nonce& mine, const std::string& where) {
  const std::string prefix = handshake_bytes();
  const std::string address = where.substr(where.rfind(' ') + 1);
  if (hello.size() < kServerHelloBytes || hello.compare(0, prefix.size(), prefix) != 0)
    throw NetworkError(detail::concat(
        "the server at ", address,
        " answered the handshake with unexpected bytes: it is not a lockstep store server (or "
        "a different protocol version). Check MASTER_ADDR/MASTER_PORT."));
  const bool server_has_secret = (get_u32(hello.data() + prefix.size()) & kSecretRequired) != 0;
  if (server_has_secret && secret.empty())
    throw AuthError(detail::concat(
        where,
        " requires the job's secret, and this process has none. Fix: start it under "
        "`lockstep run` (which passes the secret to its ranks), or set LOCKSTEP_SECRET or "
        "LOCKSTEP_SECRET_FILE as on the other nodes"));
  if (!server_has_secret && !secret.empty())
    throw AuthError(detail::concat(
        where,
        " runs without a secret, but this process has one (LOCKSTEP_SECRET or "
        "LOCKSTEP_SECRET_FILE), so the server cannot prove it belongs to this job. Fix: give "
        "every node the same --secret-file, or unset the secret everywhere"));
  auth::Nonce theirs;
  std::memcpy(theirs.data(), hello.data() + prefix.size() + 4, theirs.size());
  if (server_has_secret) {
    auth::Proof proof;
    std::memcpy(proof.data(), hello.data() + prefix.size() + 4 + theirs.size(), proof.size());
    if (!auth::check(secret, auth::Role::server, mine, theirs, proof))
      throw AuthError(detail::concat(
          "this process's secret differs from the store's at ", address,
          ". Fix: start every node with the same --secret-file (or LOCKSTEP_SECRET)"));
  }
  return theirs;
}

}  // namespace lockstep::store_proto
