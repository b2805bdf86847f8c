// Fingerprint: what one rank's collective call looks like, in a form every rank can compare.
//
// With LOCKSTEP_DEBUG=DETAIL, before each collective the ranks exchange their fingerprints (see
// fingerprint_check.h) and compare them all: the op and its sequence number, the dtype, the
// counts (each rank's whole counts array for the _v variants), the root, the reduce op, the tag
// and a forced algorithm. Unlike the always-on message header, which compares one pair of ranks
// at a time and only the fields that travel, this sees every rank's call at once, so the error
// lists each rank's call and every field that differs.
//
// Normal form of `counts`, so that fields that do not apply never differ:
//   all_reduce, broadcast, reduce            {count}
//   all_gather, gather, scatter,
//   reduce_scatter, all_to_all (uniform)     {count per rank}
//   the _v variants                          the counts array (all_to_all_v: send counts, with
//                                            the receive counts in recv_counts)
//   barrier                                  {}
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/op.h"
#include "comm/op_identity.h"

namespace lockstep::debug {

// The op's identity (comm/op_identity.h), and its counts.
struct Fingerprint : OpIdentity {
  std::vector<uint64_t> counts;       // see the normal form above
  std::vector<uint64_t> recv_counts;  // all_to_all_v only

  bool operator==(const Fingerprint&) const = default;
};

// Whether ops of this kind are fingerprinted (collectives; not send and recv).
bool is_fingerprinted(OpKind kind);

// The fingerprint of a validated op.
Fingerprint fingerprint_of(const Op& op);

// A compact binary encoding (a fixed 32-byte head, then the counts), and its inverse. decode
// throws Error on a value that is not an encoded fingerprint.
std::string encode(const Fingerprint& f);
Fingerprint decode(std::string_view bytes);

// The call as users wrote it: "all_reduce(f32, count 1000, sum)", "barrier()".
std::string call_text(const Fingerprint& f);

// Compares every rank's fingerprint of one collective (all[r] is rank r's). Returns nothing when
// they agree, else the MismatchError text: the op and sequence number, the fields that differ,
// each rank's call (ranks with identical calls grouped) and a fix. Every rank that calls this
// with the same fingerprints gets the same text.
std::optional<std::string> fingerprint_mismatch(std::span<const Fingerprint> all);

}  // namespace lockstep::debug
