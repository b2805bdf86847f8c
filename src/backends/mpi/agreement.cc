#include "backends/mpi/agreement.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "backends/mpi/errors.h"
#include "comm/op_identity.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// The fields of a descriptor, in order.
enum Field { kKind, kVariable, kSeq, kDType, kReduceOp, kRoot, kBytes, kChecksum, kFields };
static_assert(kFields == kDescriptorFields);

constexpr const char* kFieldNames[kFields] = {
    "op", "op", "sequence number", "dtype", "reduce op", "root", "byte count", "counts array"};

}  // namespace

Descriptor describe(const Op& op) {
  uint64_t bytes = op.agreed_bytes();
  if (op.kind == OpKind::all_to_all && !op.variable && !op.counts.empty())
    bytes = op.counts[0] * element_size(op.dtype);
  const OpIdentity id = identity_of(op);  // fields that do not apply are zero
  return {static_cast<int64_t>(id.kind), id.variable, static_cast<int64_t>(id.seq),
          static_cast<int64_t>(id.dtype), static_cast<int64_t>(id.reduce_op), id.root,
          static_cast<int64_t>(bytes),
          // all_to_all_v's counts differ by rank by design: check_pairs checks them.
          op.kind == OpKind::all_to_all ? 0 : op.counts_checksum()};
}

namespace {

// "all_reduce #3 (f32, sum, 4000 bytes)" from a descriptor.
std::string text_of(const Descriptor& d) {
  const auto kind = static_cast<OpKind>(d[kKind]);
  std::string t = detail::concat(op_kind_name(kind), d[kVariable] ? "_v" : "", " #", d[kSeq]);
  if (kind == OpKind::barrier) return t;
  t += detail::concat(" (", dtype_name(static_cast<DType>(d[kDType])));
  if (is_reducing(kind))
    t += detail::concat(", ", reduce_op_name(static_cast<ReduceOp>(d[kReduceOp])));
  if (is_rooted(kind)) t += detail::concat(", root ", d[kRoot]);
  return t + detail::concat(", ", d[kBytes], " bytes)");
}

// Allgathers count int64 values per rank into all (count * size of them).
void allgather(const int64_t* mine, int count, int64_t* all, MPI_Comm comm, const WaitContext& c) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_call(MPI_Iallgather(mine, count, MPI_INT64_T, all, count, MPI_INT64_T, comm, &request), c,
             "MPI_Iallgather (agreement check)");
  wait_request(request, c, "MPI_Iallgather (agreement check)");
}

[[noreturn]] void throw_mismatch(const std::string& detail_text, const WaitContext& c) {
  throw MismatchError(detail::concat(
      "mpi backend: ranks disagree about a collective: ", detail_text,
      ". Every rank must call the same collectives in the same order, with the same counts, "
      "dtype, root and reduce op (rank ",
      c.rank, " of group '", c.group, "' detected it)"));
}

// all_to_all_v: rank i's send_counts[j] must equal rank j's recv_counts[i], for every pair.
void check_pairs(const Op& op, MPI_Comm comm, int size, const WaitContext& c) {
  const size_t n = static_cast<size_t>(size);
  std::vector<int64_t> mine(2 * n);
  for (size_t j = 0; j < n; ++j) {
    mine[j] = static_cast<int64_t>(op.counts[j]);
    mine[n + j] = static_cast<int64_t>(op.recv_counts[j]);
  }
  std::vector<int64_t> all(2 * n * n);
  allgather(mine.data(), 2 * size, all.data(), comm, c);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      const int64_t sent = all[i * 2 * n + j], expected = all[j * 2 * n + n + i];
      if (sent != expected)
        throw_mismatch(
            detail::concat("in ", op.name(), " rank ", i, " sends ", sent, " elements to rank ", j,
                           ", but rank ", j, " expects ", expected, " (its recv_counts[", i, "])"),
            c);
    }
}

}  // namespace

void check_descriptors(const Op& op, std::span<const Descriptor> all, const WaitContext& c) {
  const Descriptor mine = describe(op);
  for (size_t r = 0; r < all.size(); ++r) {
    const Descriptor& theirs = all[r];
    for (int f = 0; f < kFields; ++f)
      if (theirs[f] != mine[f])
        throw_mismatch(
            detail::concat("rank ", c.rank, " called ", text_of(mine), " but rank ", r, " called ",
                           text_of(theirs), " (the ", kFieldNames[f], " differs)"),
            c);
  }
}

void check_agreement(const Op& op, MPI_Comm comm, int size, const WaitContext& c) {
  const Descriptor mine = describe(op);
  std::vector<Descriptor> descriptors(static_cast<size_t>(size));
  static_assert(sizeof(Descriptor) == kFields * sizeof(int64_t));  // contiguous, as MPI fills it
  allgather(mine.data(), kFields, descriptors.front().data(), comm, c);
  check_descriptors(op, descriptors, c);
  check_counts_pairs(op, comm, size, c);
}

void check_counts_pairs(const Op& op, MPI_Comm comm, int size, const WaitContext& c) {
  if (op.kind == OpKind::all_to_all && op.variable) check_pairs(op, comm, size, c);
}

}  // namespace lockstep::mpi
