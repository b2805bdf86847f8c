// Authentication of the data plane's connections (the tcp and hier mesh, which carries the p2p
// stream too), with the job's secret (auth.h). Both sides of such a connection already trust the
// store: each listener publishes its address there together with a fresh challenge (a nonce made
// for this listener alone), so the connector can prove itself in its very first bytes, with no
// extra round trip, and no rank ever blocks on a peer's answer before answering its own acceptors
// (the mesh would deadlock otherwise: rank 1 waiting on rank 0 while rank 0 waits on rank 1).
//
// [The exchange] The connector's hello says whether it has a secret; with one it is followed by a
// ConnectProof: its own nonce and prove(secret, client, listener's nonce, its nonce). The listener
// answers with a Verdict: accepted, with prove(secret, server, connector's nonce, listener's
// nonce) so that the connector knows it reached a rank of its own job; or refused, saying why.
// A refused or unproven connection gets nothing else and is closed; the listener logs its address
// at INFO. Without a secret on either side, the exchange is skipped (anyone who reaches the port
// can connect, as the INFO log and `lockstep doctor` say).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "net/auth.h"

namespace lockstep::auth {

// What follows a hello that says "I have a secret".
struct ConnectProof {
  Nonce nonce{};  // the connector's
  Proof proof{};  // prove(secret, client, listener's nonce, connector's nonce)
};
static_assert(sizeof(ConnectProof) == 64, "ConnectProof is a wire format");

enum class VerdictStatus : uint32_t {
  accepted = 0,
  wrong_proof = 1,     // the connector's proof does not match the listener's secret
  secret_missing = 2,  // the listener has a secret; the connector said it has none
  no_secret_here = 3,  // the connector has a secret; the listener has none
};

// The listener's answer to a connector (always sent, with or without secrets).
struct Verdict {
  static constexpr uint32_t kMagic = 0x4C4B5644;  // "LKVD"
  uint32_t magic = kMagic;
  VerdictStatus status = VerdictStatus::accepted;
  Proof proof{};  // accepted with a secret: prove(secret, server, connector's nonce, listener's)
};
static_assert(sizeof(Verdict) == 40, "Verdict is a wire format");

// A listener's challenge as published with its address: 64 hex digits.
std::string to_hex(const Nonce& nonce);
// Parses to_hex's text; false when it is not one.
bool from_hex(std::string_view text, Nonce& nonce);

// The connector's proof for a listener that published `challenge`.
ConnectProof make_connect_proof(std::string_view secret, const Nonce& challenge);

// The listener's verdict on a connector whose hello said `has_secret` (with `proof` following it
// then; ignored otherwise).
Verdict judge(std::string_view secret, const Nonce& challenge, bool has_secret,
              const ConnectProof& proof);

// Why a refused connector was refused, for the listener's INFO log line.
std::string refusal_text(VerdictStatus status);

// Checks the listener's verdict on this connector (which sent `sent`, having `secret`): returns
// when it was accepted and, with a secret, the listener proved it knows it; otherwise throws
// AuthError naming `listener` ("rank 0 (10.0.0.1:4711)") and the fix.
void check_verdict(std::string_view secret, const Nonce& challenge, const ConnectProof& sent,
                   const Verdict& verdict, const std::string& listener);

}  // namespace lockstep::auth
