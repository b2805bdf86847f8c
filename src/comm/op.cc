#include "comm/op.h"

#include "comm/op_identity.h"

#include <numeric>

#include "lockstep/core/error.h"

namespace lockstep {

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::reduce:
      return "reduce";
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::gather:
      return "gather";
    case OpKind::scatter:
      return "scatter";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::all_to_all:
      return "all_to_all";
    case OpKind::barrier:
      return "barrier";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
  }
  return "unknown";
}

uint64_t Op::agreed_bytes() const {
  const size_t es = element_size(dtype);
  switch (kind) {
    case OpKind::broadcast:
    case OpKind::all_reduce:
    case OpKind::reduce:
      return count * es;
    case OpKind::all_gather:
    case OpKind::gather:
    case OpKind::scatter:
    case OpKind::reduce_scatter:
      if (counts.empty()) return 0;
      if (!variable) return counts[0] * es;
      return std::accumulate(counts.begin(), counts.end(), size_t{0}) * es;
    case OpKind::all_to_all:
    case OpKind::barrier:
    case OpKind::send:
    case OpKind::recv:
      return 0;
  }
  return 0;
}

uint32_t Op::counts_checksum() const {
  if (!variable) return 0;
  // FNV-1a over the counts: cheap, and any difference in a _v counts array shows.
  uint32_t h = 2166136261u;
  for (size_t c : counts) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint8_t>(c >> (8 * i));
      h *= 16777619u;
    }
  }
  return h;
}

std::string order_mismatch_text(int peer, std::string_view theirs, int rank,
                                std::string_view mine) {
  return detail::concat("rank ", peer, " is in ", theirs, " while rank ", rank, " is in ", mine,
                        ": the ranks called collectives in a different order. Fix: every rank "
                        "must issue the same collectives in the same order (look for a collective "
                        "under a rank-dependent branch)");
}

std::string Op::name() const {
  std::string n(op_kind_name(kind));
  if (variable) n += "_v";
  n += " #" + std::to_string(seq);
  if (kind == OpKind::send) n += " to rank " + std::to_string(peer);
  if (kind == OpKind::recv) n += peer < 0 ? " from any rank" : " from rank " + std::to_string(peer);
  return n;
}

std::string Op::describe() const {
  std::string d = name() + " (" + std::string(dtype_name(dtype));
  switch (kind) {
    case OpKind::all_reduce:
    case OpKind::reduce:
    case OpKind::reduce_scatter:
      d += ", " + std::string(reduce_op_name(reduce_op));
      break;
    default:
      break;
  }
  if (kind == OpKind::broadcast || kind == OpKind::reduce || kind == OpKind::gather ||
      kind == OpKind::scatter)
    d += ", root " + std::to_string(root);
  const bool p2p = kind == OpKind::send || kind == OpKind::recv;
  d += ", " + std::to_string(p2p ? count * element_size(dtype) : agreed_bytes()) + " bytes)";
  return d;
}

void reject_p2p(const Op& op, std::string_view where) {
  throw InvalidArgument(detail::concat(op.name(), ": ", where,
                                       " runs collectives only; send and recv go through the "
                                       "group's point-to-point engine"));
}

OpIdentity identity_of(const Op& op) {
  return {.seq = op.seq,
          .kind = op.kind,
          .variable = op.variable,
          .dtype = op.kind == OpKind::barrier ? DType::u8 : op.dtype,
          .reduce_op = is_reducing(op.kind) ? op.reduce_op : ReduceOp::sum,
          .algorithm = has_algorithm_choice(op.kind) ? op.algorithm : Algorithm::automatic,
          .root = is_rooted(op.kind) ? op.root : 0,
          .tag = op.tag};
}

}  // namespace lockstep
