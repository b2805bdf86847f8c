#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

namespace lockstep::auth {

namespace {

std::string_view label_of(Role role) {
  return role == Role::server ? "lockstep auth v1: server" : "lockstep auth v1: client";
}

void random_bytes(uint8_t* out, size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1)
    throw ConfigError("OpenSSL's random generator failed (RAND_bytes): cannot make a nonce");
}

}  // namespace

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(detail::concat("the secret file ", path,
                                     " cannot be read. Fix: give every node a readable copy of "
                                     "the same secret file"));
  std::ostringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty())
    throw ConfigError(detail::concat("the secret file ", path,
                                     " is empty. Fix: put the job's secret in it (for example "
                                     "`openssl rand -hex 32 > FILE`)"));
  return secret;
}

std::string secret_from_environment() {
  if (auto secret = live_setting(LiveSetting::secret)) return *secret;
  auto path = live_setting(LiveSetting::secret_file);
  return path ? read_secret_file(*path) : "";
}

std::string make_secret() {
  uint8_t bytes[32];
  random_bytes(bytes, sizeof bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

Nonce make_nonce() {
  Nonce n;
  random_bytes(n.data(), n.size());
  return n;
}

Proof prove(std::string_view secret, Role role, const Nonce& theirs, const Nonce& mine) {
  const std::string_view label = label_of(role);
  std::string message(label);
  message.append(reinterpret_cast<const char*>(theirs.data()), theirs.size());
  message.append(reinterpret_cast<const char*>(mine.data()), mine.size());
  Proof proof{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), proof.data(),
            &length) ||
      length != proof.size())
    throw ConfigError("OpenSSL's HMAC-SHA256 failed: cannot authenticate a connection");
  return proof;
}

bool check(std::string_view secret, Role role, const Nonce& theirs_of_role,
           const Nonce& mine_of_role, const Proof& got) {
  const Proof want = prove(secret, role, theirs_of_role, mine_of_role);
  return CRYPTO_memcmp(want.data(), got.data(), want.size()) == 0;
}

}  // namespace lockstep::auth
