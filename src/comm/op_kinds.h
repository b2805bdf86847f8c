// Which fields of an Op matter for its kind: shared by the wire header, the fingerprints and the
// flight recorder, so that they agree on what two calls must have in common.
#pragma once

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

}  // namespace lockstep
