#include "algorithms/message_header.h"

#include "comm/op_identity.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// A recv matches the peer's send: both sides put kind `send` on the wire.
OpKind wire_kind(OpKind k) {
  return k == OpKind::recv ? OpKind::send : k;
}

std::string kind_text(OpKind kind, bool variable) {
  std::string s(op_kind_name(kind));
  if (variable) s += "_v";
  return s;
}

// How the sender's op reads in messages: "broadcast #5", "send #3 to rank 0".
std::string peer_op_name(const MessageHeader& h, int rank) {
  std::string s = kind_text(h.kind, h.variable != 0) + " #" + std::to_string(h.seq);
  if (h.kind == OpKind::send) s += " to rank " + std::to_string(rank);
  return s;
}

std::string bytes_fix(const Op& op) {
  if (op.variable)
    return "every rank must pass the same counts array to " + kind_text(op.kind, true);
  switch (op.kind) {
    case OpKind::all_gather:
      return "make every rank pass the same count; use all_gather_v for uneven data";
    case OpKind::gather:
      return "make every rank pass the same count; use gather_v for uneven data";
    case OpKind::scatter:
      return "make every rank pass the same count; use scatter_v for uneven data";
    case OpKind::reduce_scatter:
      return "make every rank pass the same count; use reduce_scatter_v for uneven data";
    default:
      return "make every rank pass the same count (and the same dtype)";
  }
}

std::string order_mismatch(const MessageHeader& got, const HeaderCheck& c) {
  const Op& op = c.op;
  std::string theirs = peer_op_name(got, c.rank);
  if (got.kind == wire_kind(op.kind) && got.seq == op.seq)
    return detail::concat(op.name(), ": rank ", c.peer, " called ",
                          kind_text(got.kind, got.variable != 0), ", rank ", c.rank, " called ",
                          kind_text(op.kind, op.variable),
                          ". Fix: call the same variant on every rank");
  if (got.kind != wire_kind(op.kind)) return order_mismatch_text(c.peer, theirs, c.rank, op.name());
  return detail::concat(op.name(), ": rank ", c.peer, " is at ", theirs, ", rank ", c.rank, " at #",
                        op.seq, ": one rank skipped or added an op. Fix: every rank ",
                        "must issue the same number of collectives (and of sends/recvs per pair)");
}

std::optional<std::string> identity_mismatch(const MessageHeader& got, const MessageHeader& want,
                                             const HeaderCheck& c) {
  const std::string who = c.op.name() + ": rank " + std::to_string(c.peer);
  const std::string me = "rank " + std::to_string(c.rank);
  if (got.dtype != want.dtype)
    return detail::concat(who, " passes ", dtype_name(got.dtype), " data, ", me, " passes ",
                          dtype_name(want.dtype), ". Fix: every rank must use the same dtype");
  if (got.reduce_op != want.reduce_op)
    return detail::concat(who, " reduces with ", reduce_op_name(got.reduce_op), ", ", me, " with ",
                          reduce_op_name(want.reduce_op),
                          ". Fix: pass the same ReduceOp on every rank");
  if (got.root != want.root)
    return detail::concat(who, " uses root ", got.root, ", ", me, " uses root ", want.root,
                          ". Fix: pass the same root on every rank");
  if (got.tag != want.tag)
    return detail::concat(who, " sent tag ", got.tag, ", ", me, " expects tag ", want.tag,
                          ". Fix: use the same tag on both sides");
  if (got.algorithm != want.algorithm)
    return detail::concat(who, " forces algorithm ", algorithm_name(got.algorithm), ", ", me,
                          " forces ", algorithm_name(want.algorithm),
                          ". Fix: pass the same algorithm (or automatic) on every rank");
  return std::nullopt;
}

std::string size_text(uint64_t got, uint64_t want, DType dtype) {
  const uint64_t es = element_size(dtype);
  return detail::concat(" (", got / es, " vs ", want / es, " ", dtype_name(dtype), " elements)");
}

std::optional<std::string> size_mismatch(const MessageHeader& got, const MessageHeader& want,
                                         const HeaderCheck& c) {
  const Op& op = c.op;
  const std::string who = op.name() + ": rank " + std::to_string(c.peer);
  const std::string me = "rank " + std::to_string(c.rank);
  if (got.agreed_bytes != want.agreed_bytes)
    return detail::concat(
        who, " sent ", got.agreed_bytes, " bytes, ", me, " expected ", want.agreed_bytes,
        size_text(got.agreed_bytes, want.agreed_bytes, op.dtype), ". Fix: ", bytes_fix(op));
  if (got.counts_checksum != want.counts_checksum)
    return detail::concat(who, " and ", me, " pass different counts arrays (checksums ",
                          got.counts_checksum, " vs ", want.counts_checksum,
                          "). Fix: ", bytes_fix(op));
  if (got.payload_bytes == want.payload_bytes) return std::nullopt;
  if (op.kind == OpKind::all_to_all)
    return detail::concat(who, " sends ", got.payload_bytes, " bytes to ", me, ", which expects ",
                          want.payload_bytes,
                          size_text(got.payload_bytes, want.payload_bytes, op.dtype),
                          ". Fix: rank i's send_counts[j] must equal rank j's recv_counts[i]");
  if (op.kind == OpKind::recv || op.kind == OpKind::send)
    return detail::concat(who, " sent ", got.payload_bytes, " bytes, ", me, " expected ",
                          want.payload_bytes,
                          size_text(got.payload_bytes, want.payload_bytes, op.dtype),
                          ". Fix: a send and its recv must have the same count and dtype");
  return detail::concat(who, " sent a ", got.payload_bytes, "-byte message where ", me,
                        " expected ", want.payload_bytes,
                        " bytes (the ranks chose different algorithms; please report this)");
}

}  // namespace

MessageHeader data_header(const Op& op, uint64_t payload_bytes) {
  const OpIdentity id = identity_of(op);
  MessageHeader h;
  h.kind = wire_kind(id.kind);
  h.variable = id.variable ? 1 : 0;
  h.seq = id.seq;
  h.dtype = id.dtype;
  h.reduce_op = id.reduce_op;
  h.root = id.root;
  h.tag = id.tag;
  h.algorithm = id.algorithm;
  h.agreed_bytes = op.agreed_bytes();
  // all_to_all_v: each rank's counts are its own (pairs are checked by payload size instead).
  h.counts_checksum = op.kind == OpKind::all_to_all ? 0 : op.counts_checksum();
  h.payload_bytes = payload_bytes;
  return h;
}

MessageHeader control_header(FrameType frame, uint64_t payload_bytes) {
  MessageHeader h;
  h.frame = frame;
  h.payload_bytes = payload_bytes;
  return h;
}

namespace {

// An abort frame's tag when the sender failed inside an op: its seq is then that op's.
constexpr uint32_t kAbortInOp = 1;

}  // namespace

MessageHeader abort_header(uint64_t payload_bytes, std::optional<uint64_t> failed_seq) {
  MessageHeader h = control_header(FrameType::abort, payload_bytes);
  if (failed_seq) {
    h.tag = kAbortInOp;
    h.seq = *failed_seq;
  }
  return h;
}

std::optional<uint64_t> failed_seq_of(const MessageHeader& abort) {
  if (abort.tag != kAbortInOp) return std::nullopt;
  return abort.seq;
}

bool header_is_valid(const MessageHeader& h) {
  return h.magic == kMessageMagic && (h.frame == FrameType::data || h.frame == FrameType::abort ||
                                      h.frame == FrameType::bye || h.frame == FrameType::p2p);
}

std::optional<std::string> header_mismatch(const MessageHeader& got, uint64_t expected_bytes,
                                           const HeaderCheck& check) {
  const MessageHeader want = data_header(check.op, expected_bytes);
  if (got.kind != want.kind || got.seq != want.seq || got.variable != want.variable)
    return order_mismatch(got, check);
  if (auto m = identity_mismatch(got, want, check)) return m;
  return size_mismatch(got, want, check);
}

}  // namespace lockstep
