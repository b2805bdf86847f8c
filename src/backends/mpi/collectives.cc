#include "backends/mpi/collectives.h"

#include <climits>
#include <cstring>
#include <vector>

#include "backends/mpi/errors.h"
#include "backends/mpi/types.h"
#include "core/reduce.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// Counts and displacements of a _v call, as MPI wants them.
struct Layout {
  std::vector<int> counts, displs;
};

Layout layout_of(const std::vector<size_t>& counts, const Op& op) {
  Layout l;
  size_t offset = 0;
  for (size_t c : counts) {
    l.counts.push_back(mpi_count(c, op, "a count"));
    l.displs.push_back(mpi_count(offset, op, "a displacement"));
    offset += c;
  }
  return l;
}

const std::byte* bytes(const void* p) {
  return static_cast<const std::byte*>(p);
}

// The input, or a scratch copy of it when it overlaps the output (MPI forbids aliasing).
const void* unaliased(const void* in, size_t in_bytes, const void* out, size_t out_bytes,
                      Scratch& scratch) {
  if (in_bytes == 0 || out_bytes == 0) return in;
  if (bytes(in) + in_bytes <= bytes(out) || bytes(out) + out_bytes <= bytes(in)) return in;
  void* copy = scratch.get(Scratch::kCopy, in_bytes);
  std::memcpy(copy, in, in_bytes);
  return copy;
}

size_t sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t c : v) s += c;
  return s;
}

class Starter {
 public:
  Starter(const Op& op, MPI_Comm comm, int rank, Scratch& scratch)
      : op_(op),
        comm_(comm),
        rank_(rank),
        scratch_(scratch),
        es_(element_size(op.dtype)),
        type_(datatype_of(op.dtype)) {}

  Started start() {
    switch (op_.kind) {
      case OpKind::barrier:
        return call(MPI_Ibarrier(comm_, &request_), "MPI_Ibarrier");
      case OpKind::broadcast:
        return call(MPI_Ibcast(op_.output, count(), type_, op_.root, comm_, &request_),
                    "MPI_Ibcast");
      case OpKind::all_reduce:
        return call(MPI_Iallreduce(op_.input == op_.output ? MPI_IN_PLACE : op_.input, op_.output,
                                   count(), type_, reduce_op(), comm_, &request_),
                    "MPI_Iallreduce");
      case OpKind::reduce: {
        const bool in_place = rank_ == op_.root && op_.input == op_.output;
        return call(MPI_Ireduce(in_place ? MPI_IN_PLACE : op_.input, op_.output, count(), type_,
                                reduce_op(), op_.root, comm_, &request_),
                    "MPI_Ireduce");
      }
      case OpKind::all_gather:
        return all_gather();
      case OpKind::gather:
        return gather();
      case OpKind::scatter:
        return scatter();
      case OpKind::reduce_scatter:
        return reduce_scatter();
      case OpKind::all_to_all:
        return all_to_all();
      default:
        break;
    }
    throw InvalidArgument(detail::concat("mpi backend: ", op_.name(), " is not a collective"));
  }

 private:
  Started call(int code, const char* name) {
    check_mpi(code, op_.describe(), rank_, name);
    return {request_, name};
  }
  int count() const { return mpi_count(op_.count, op_, "the count"); }
  MPI_Op reduce_op() const { return op_of(op_.reduce_op, op_.dtype); }
  // Address of element `offset` of p.
  const std::byte* at(const void* p, size_t offset) const { return bytes(p) + offset * es_; }
  size_t mine() const { return op_.counts[static_cast<size_t>(rank_)]; }

  Started all_gather() {
    Layout l = layout_of(op_.counts, op_);
    const size_t total = sum(op_.counts);
    const void* in = op_.input;
    if (in == at(op_.output, static_cast<size_t>(l.displs[static_cast<size_t>(rank_)])))
      in = MPI_IN_PLACE;
    else
      in = unaliased(in, mine() * es_, op_.output, total * es_, scratch_);
    if (!op_.variable)
      return call(
          MPI_Iallgather(in, l.counts[0], type_, op_.output, l.counts[0], type_, comm_, &request_),
          "MPI_Iallgather");
    return call(MPI_Iallgatherv(in, l.counts[static_cast<size_t>(rank_)], type_, op_.output,
                                l.counts.data(), l.displs.data(), type_, comm_, &request_),
                "MPI_Iallgatherv");
  }

  Started gather() {
    Layout l = layout_of(op_.counts, op_);
    const void* in = op_.input;
    if (rank_ == op_.root) {
      if (in == at(op_.output, static_cast<size_t>(l.displs[static_cast<size_t>(rank_)])))
        in = MPI_IN_PLACE;
      else
        in = unaliased(in, mine() * es_, op_.output, sum(op_.counts) * es_, scratch_);
    }
    if (!op_.variable)
      return call(MPI_Igather(in, l.counts[0], type_, op_.output, l.counts[0], type_, op_.root,
                              comm_, &request_),
                  "MPI_Igather");
    return call(MPI_Igatherv(in, l.counts[static_cast<size_t>(rank_)], type_, op_.output,
                             l.counts.data(), l.displs.data(), type_, op_.root, comm_, &request_),
                "MPI_Igatherv");
  }

  Started scatter() {
    Layout l = layout_of(op_.counts, op_);
    const void* in = op_.input;
    void* out = op_.output;
    if (rank_ == op_.root) {
      if (out == at(in, static_cast<size_t>(l.displs[static_cast<size_t>(rank_)])))
        out = MPI_IN_PLACE;
      else
        in = unaliased(in, sum(op_.counts) * es_, out, mine() * es_, scratch_);
    }
    if (!op_.variable)
      return call(
          MPI_Iscatter(in, l.counts[0], type_, out, l.counts[0], type_, op_.root, comm_, &request_),
          "MPI_Iscatter");
    return call(
        MPI_Iscatterv(in, l.counts.data(), l.displs.data(), type_, out,
                      l.counts[static_cast<size_t>(rank_)], type_, op_.root, comm_, &request_),
        "MPI_Iscatterv");
  }

  Started reduce_scatter() {
    Layout l = layout_of(op_.counts, op_);
    const void* in =
        unaliased(op_.input, sum(op_.counts) * es_, op_.output, mine() * es_, scratch_);
    if (!op_.variable)
      return call(MPI_Ireduce_scatter_block(in, op_.output, l.counts[0], type_, reduce_op(), comm_,
                                            &request_),
                  "MPI_Ireduce_scatter_block");
    return call(
        MPI_Ireduce_scatter(in, op_.output, l.counts.data(), type_, reduce_op(), comm_, &request_),
        "MPI_Ireduce_scatter");
  }

  Started all_to_all() {
    Layout send = layout_of(op_.counts, op_), recv = layout_of(op_.recv_counts, op_);
    const void* in = unaliased(op_.input, sum(op_.counts) * es_, op_.output,
                               sum(op_.recv_counts) * es_, scratch_);
    if (!op_.variable)
      return call(MPI_Ialltoall(in, send.counts[0], type_, op_.output, recv.counts[0], type_, comm_,
                                &request_),
                  "MPI_Ialltoall");
    return call(MPI_Ialltoallv(in, send.counts.data(), send.displs.data(), type_, op_.output,
                               recv.counts.data(), recv.displs.data(), type_, comm_, &request_),
                "MPI_Ialltoallv");
  }

  const Op& op_;
  MPI_Comm comm_;
  int rank_;
  Scratch& scratch_;
  size_t es_;
  MPI_Datatype type_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace

int mpi_count(size_t count, const Op& op, const char* what) {
  LOCKSTEP_ENFORCE(count <= static_cast<size_t>(INT_MAX), InvalidArgument,
                   "mpi backend: ", op.describe(), ": ", what, " of ", count,
                   " elements is above what MPI's int counts allow (", INT_MAX,
                   "); split the call, or use the shm or tcp backend");
  return static_cast<int>(count);
}

void check_counts(const Op& op) {
  mpi_count(op.count, op, "the count");
  for (const auto* counts : {&op.counts, &op.recv_counts}) layout_of(*counts, op);
}

Started start_collective(const Op& op, MPI_Comm comm, int rank, Scratch& scratch) {
  return Starter(op, comm, rank, scratch).start();
}

void finish_collective(const Op& op, int rank, int size) {
  if (op.reduce_op != ReduceOp::avg) return;
  switch (op.kind) {
    case OpKind::all_reduce:
      finish_average(op.output, op.count, op.dtype, size);
      break;
    case OpKind::reduce:
      if (rank == op.root) finish_average(op.output, op.count, op.dtype, size);
      break;
    case OpKind::reduce_scatter:
      finish_average(op.output, op.counts[static_cast<size_t>(rank)], op.dtype, size);
      break;
    default:
      break;
  }
}

}  // namespace lockstep::mpi
