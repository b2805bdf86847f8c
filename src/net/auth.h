// Authentication of a job's connections: the job's secret and the challenge-response that proves,
// in both directions, that each side of a connection knows it, without sending it.
//
// [The secret] A job shares one secret: `lockstep run` makes a random one for every job (or takes
// the user's --secret-file, for several nodes) and hands it to its ranks through the environment,
// never on a command line. A process reads it from LOCKSTEP_SECRET, else from the file named by
// LOCKSTEP_SECRET_FILE. Without either, connections are not authenticated (anyone who reaches a
// port can join), and `lockstep doctor` and the INFO log say so.
//
// [The exchange] Each side sends a fresh 32-byte random nonce; each then sends
// HMAC-SHA256(secret, role || the other's nonce || its own nonce), where role names the sender's
// side. A proof is bound to both nonces and to its direction, so a recorded proof is useless on
// another connection (replay) and cannot be reflected back. Proofs are compared in constant
// time. The crypto is OpenSSL's (libcrypto): no hand-written primitives.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// The job's secret from the environment (LOCKSTEP_SECRET, else the file LOCKSTEP_SECRET_FILE
// names; a trailing newline of the file is dropped), "" when neither is set. ConfigError when the
// file cannot be read or is empty. Never logged.
std::string secret_from_environment();

// The secret in the file at `path` (a trailing newline dropped). ConfigError naming the file when
// it cannot be read or is empty.
std::string read_secret_file(const std::string& path);

// A new random secret for a job: 32 random bytes as 64 hex digits.
std::string make_secret();

// Fresh random bytes from OpenSSL's CSPRNG.
Nonce make_nonce();

// The two sides of an exchange.
enum class Role : uint8_t { server, client };

// HMAC-SHA256(secret, role-label || theirs || mine): the proof `role` sends.
Proof prove(std::string_view secret, Role role, const Nonce& theirs, const Nonce& mine);

// Whether `got` is the proof that `role` must send (constant time).
bool check(std::string_view secret, Role role, const Nonce& theirs_of_role,
           const Nonce& mine_of_role, const Proof& got);

}  // namespace lockstep::auth
