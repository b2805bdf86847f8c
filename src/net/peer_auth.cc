#include "net/peer_auth.h"

#include "lockstep/core/error.h"

namespace lockstep::auth {

namespace {

constexpr char kHex[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

constexpr const char* kFix =
    "Fix: start every node with the same --secret-file (or the same LOCKSTEP_SECRET)";

}  // namespace

std::string to_hex(const Nonce& nonce) {
  std::string out;
  out.reserve(2 * nonce.size());
  for (uint8_t b : nonce) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool from_hex(std::string_view text, Nonce& nonce) {
  if (text.size() != 2 * nonce.size()) return false;
  for (size_t i = 0; i < nonce.size(); ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    nonce[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

ConnectProof make_connect_proof(std::string_view secret, const Nonce& challenge) {
  ConnectProof p;
  p.nonce = make_nonce();
  p.proof = prove(secret, Role::client, challenge, p.nonce);
  return p;
}

Verdict judge(std::string_view secret, const Nonce& challenge, bool has_secret,
              const ConnectProof& proof) {
  Verdict v;
  if (secret.empty()) {
    v.status = has_secret ? VerdictStatus::no_secret_here : VerdictStatus::accepted;
    return v;
  }
  if (!has_secret) {
    v.status = VerdictStatus::secret_missing;
  } else if (!check(secret, Role::client, challenge, proof.nonce, proof.proof)) {
    v.status = VerdictStatus::wrong_proof;
  } else {
    v.proof = prove(secret, Role::server, proof.nonce, challenge);
  }
  return v;
}

std::string refusal_text(VerdictStatus status) {
  switch (status) {
    case VerdictStatus::accepted:
      return "accepted";
    case VerdictStatus::wrong_proof:
      return "refused: it does not know the job's secret (wrong proof)";
    case VerdictStatus::secret_missing:
      return "refused: it has no secret, and this job has one";
    case VerdictStatus::no_secret_here:
      return "refused: it has a secret, and this rank has none";
  }
  return "refused";
}

void check_verdict(std::string_view secret, const Nonce& challenge, const ConnectProof& sent,
                   const Verdict& verdict, const std::string& listener) {
  if (verdict.magic != Verdict::kMagic)
    throw AuthError(detail::concat(listener,
                                   " answered with bytes that are not a lockstep "
                                   "verdict: another program on that port, or another lockstep "
                                   "version?"));
  switch (verdict.status) {
    case VerdictStatus::accepted:
      break;
    case VerdictStatus::wrong_proof:
      throw AuthError(detail::concat(listener, " refused this rank: their secrets differ. ", kFix));
    case VerdictStatus::secret_missing:
      throw AuthError(
          detail::concat(listener, " has the job's secret and this rank has none. ", kFix));
    case VerdictStatus::no_secret_here:
      throw AuthError(detail::concat(listener, " has no secret and this rank has one. ", kFix));
    default:
      throw AuthError(detail::concat(listener, " answered with an unknown verdict ",
                                     static_cast<uint32_t>(verdict.status)));
  }
  if (secret.empty()) return;
  if (!check(secret, Role::server, sent.nonce, challenge, verdict.proof))
    throw AuthError(detail::concat(listener,
                                   " accepted this rank but could not prove it knows "
                                   "the job's secret: it is not a rank of this job. ",
                                   kFix));
}

}  // namespace lockstep::auth
