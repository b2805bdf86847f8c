// OpIdentity: what the calls of one op on every rank must have in common, in one normal form, and
// which fields of an Op matter for its kind. Fields that do not apply to the kind are zero (the
// root of an all_reduce, the reduce op of a broadcast, a barrier's dtype), so that they never
// differ. The one encoding of an op's identity: the wire header of collectives' messages carries
// it (src/algorithms/message_header.h), the LOCKSTEP_DEBUG=DETAIL fingerprints are it plus the
// counts (src/debug/fingerprint.h), and the p2p engine's frames carry a message's part of it, its
// tag and dtype (src/p2p/frames.h: messages, not ops, are matched there).
#pragma once

#include <cstdint>

#include "comm/op.h"

namespace lockstep {

// all_reduce, reduce, reduce_scatter: the reduce op is part of the call.
inline bool is_reducing(OpKind k) {
  return k == OpKind::all_reduce || k == OpKind::reduce || k == OpKind::reduce_scatter;
}
// broadcast, reduce, gather, scatter: the root is part of the call.
inline bool is_rooted(OpKind k) {
  return k == OpKind::broadcast || k == OpKind::reduce || k == OpKind::gather ||
         k == OpKind::scatter;
}
// all_reduce and broadcast: a forced algorithm is part of the call.
inline bool has_algorithm_choice(OpKind k) {
  return k == OpKind::all_reduce || k == OpKind::broadcast;
}

struct OpIdentity {
  uint64_t seq = 0;
  OpKind kind = OpKind::barrier;
  bool variable = false;
  DType dtype = DType::u8;                     // a barrier's: u8 (it moves nothing)
  ReduceOp reduce_op = ReduceOp::sum;          // reducing ops only, else sum
  Algorithm algorithm = Algorithm::automatic;  // all_reduce and broadcast only
  int32_t root = 0;                            // rooted ops only, else 0
  uint32_t tag = 0;

  bool operator==(const OpIdentity&) const = default;
};

// op's identity in normal form.
OpIdentity identity_of(const Op& op);

}  // namespace lockstep
