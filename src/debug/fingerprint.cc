// Fingerprint: normal form, encoding and call text (the comparison is fingerprint_compare.cc).
#include "debug/fingerprint.h"

#include <cstring>

#include "comm/op_identity.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

constexpr uint32_t kFingerprintMagic = 0x4C4B4650;  // "LKFP"
constexpr size_t kMaxCountsShown = 8;

// The fixed head of an encoded fingerprint; the counts follow as uint64_t.
struct EncodedHead {
  uint32_t magic = kFingerprintMagic;
  uint8_t kind = 0;
  uint8_t variable = 0;
  uint8_t dtype = 0;
  uint8_t reduce_op = 0;
  uint64_t seq = 0;
  int32_t root = 0;
  uint32_t tag = 0;
  uint8_t algorithm = 0;
  uint8_t reserved[3] = {};
  uint32_t counts = 0;  // number of counts
  // recv_counts: the rest
};
static_assert(sizeof(EncodedHead) == 32, "the encoded head has a fixed size");

bool is_per_rank(OpKind k) {
  return k == OpKind::all_gather || k == OpKind::gather || k == OpKind::scatter ||
         k == OpKind::reduce_scatter || k == OpKind::all_to_all;
}

std::string list_text(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < kMaxCountsShown; ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > kMaxCountsShown) s += ", ... (" + std::to_string(v.size()) + " entries)";
  return s + "]";
}

std::string counts_text(const Fingerprint& f) {
  if (f.kind == OpKind::barrier) return "";
  if (f.kind == OpKind::all_to_all && f.variable)
    return "send counts " + list_text(f.counts) + ", recv counts " + list_text(f.recv_counts);
  if (f.variable) return "counts " + list_text(f.counts);
  std::string n = f.counts.empty() ? "0" : std::to_string(f.counts[0]);
  return "count " + n + (is_per_rank(f.kind) ? " per rank" : "");
}

}  // namespace

bool is_fingerprinted(OpKind kind) {
  return kind != OpKind::send && kind != OpKind::recv;
}

Fingerprint fingerprint_of(const Op& op) {
  Fingerprint f;
  static_cast<OpIdentity&>(f) = identity_of(op);
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::broadcast:
    case OpKind::reduce:
      f.counts = {op.count};
      break;
    case OpKind::barrier:
    case OpKind::send:
    case OpKind::recv:
      break;
    default:
      if (op.variable) {
        f.counts.assign(op.counts.begin(), op.counts.end());
        if (op.kind == OpKind::all_to_all)
          f.recv_counts.assign(op.recv_counts.begin(), op.recv_counts.end());
      } else {
        f.counts = {op.counts.empty() ? 0 : op.counts[0]};
      }
  }
  return f;
}

std::string encode(const Fingerprint& f) {
  EncodedHead h;
  h.kind = static_cast<uint8_t>(f.kind);
  h.variable = f.variable ? 1 : 0;
  h.dtype = static_cast<uint8_t>(f.dtype);
  h.reduce_op = static_cast<uint8_t>(f.reduce_op);
  h.seq = f.seq;
  h.root = f.root;
  h.tag = f.tag;
  h.algorithm = static_cast<uint8_t>(f.algorithm);
  h.counts = static_cast<uint32_t>(f.counts.size());
  std::string out(sizeof h + 8 * (f.counts.size() + f.recv_counts.size()), '\0');
  std::memcpy(out.data(), &h, sizeof h);
  char* p = out.data() + sizeof h;
  for (const auto* v : {&f.counts, &f.recv_counts}) {
    if (v->empty()) continue;
    std::memcpy(p, v->data(), 8 * v->size());
    p += 8 * v->size();
  }
  return out;
}

Fingerprint decode(std::string_view bytes) {
  EncodedHead h;
  LOCKSTEP_ENFORCE(bytes.size() >= sizeof h && (bytes.size() - sizeof h) % 8 == 0, Error,
                   "fingerprint check: a ", bytes.size(), "-byte value is not a fingerprint");
  std::memcpy(&h, bytes.data(), sizeof h);
  const size_t total = (bytes.size() - sizeof h) / 8;
  LOCKSTEP_ENFORCE(h.magic == kFingerprintMagic && h.counts <= total &&
                       h.kind <= static_cast<uint8_t>(OpKind::recv),
                   Error,
                   "fingerprint check: a value in the store is not a fingerprint (another "
                   "program uses the same store keys?)");
  Fingerprint f;
  f.kind = static_cast<OpKind>(h.kind);
  f.variable = h.variable != 0;
  f.dtype = static_cast<DType>(h.dtype);
  f.reduce_op = static_cast<ReduceOp>(h.reduce_op);
  f.seq = h.seq;
  f.root = h.root;
  f.tag = h.tag;
  f.algorithm = static_cast<Algorithm>(h.algorithm);
  f.counts.resize(h.counts);
  f.recv_counts.resize(total - h.counts);
  const char* p = bytes.data() + sizeof h;
  if (!f.counts.empty()) std::memcpy(f.counts.data(), p, 8 * f.counts.size());
  p += 8 * f.counts.size();
  if (!f.recv_counts.empty()) std::memcpy(f.recv_counts.data(), p, 8 * f.recv_counts.size());
  return f;
}

std::string call_text(const Fingerprint& f) {
  std::string s(op_kind_name(f.kind));
  if (f.variable) s += "_v";
  s += "(";
  if (f.kind == OpKind::barrier) return s + ")";
  s += std::string(dtype_name(f.dtype)) + ", " + counts_text(f);
  if (is_reducing(f.kind)) s += ", " + std::string(reduce_op_name(f.reduce_op));
  if (is_rooted(f.kind)) s += ", root " + std::to_string(f.root);
  if (f.tag != 0) s += ", tag " + std::to_string(f.tag);
  if (f.algorithm != Algorithm::automatic)
    s += ", algorithm " + std::string(algorithm_name(f.algorithm));
  return s + ")";
}

}  // namespace lockstep::debug
