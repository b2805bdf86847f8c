#include "backends/mpi/p2p.h"

#include <cstring>
#include <thread>

#include "backends/mpi/collectives.h"
#include "backends/mpi/errors.h"
#include "backends/mpi/runtime.h"
#include "backends/mpi/types.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// MPI_TAG_UB: the largest tag MPI accepts (at least 32767).
int tag_upper_bound() {
  static const int bound = [] {
    void* value = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
    return found ? *static_cast<int*>(value) : 32767;
  }();
  return bound;
}

}  // namespace

int checked_tag(const Op& op) {
  LOCKSTEP_ENFORCE(op.tag <= static_cast<uint32_t>(tag_upper_bound()), InvalidArgument,
                   "mpi backend: ", op.name(), ": tag ", op.tag, " is above MPI_TAG_UB (",
                   tag_upper_bound(), "); use a smaller tag");
  return static_cast<int>(op.tag);
}

PointToPoint::~PointToPoint() {
  // [Leftover requests] MPI may still read these buffers: they are deliberately never freed.
  for (Pending& p : pending_) {
    adopt_leftover(p.request);
    new std::vector<std::byte>(std::move(p.data));
  }
}

void PointToPoint::send(const Op& op, const WaitContext& c) {
  const int tag = checked_tag(op);
  const int count = mpi_count(op.count, op, "the count");
  const size_t bytes = op.count * element_size(op.dtype);
  reap(c);
  while (!pending_.empty() && pending_bytes_ + bytes > kMaxPendingBytes) {
    wait_request(pending_.front().request, c, "MPI_Isend (an earlier send)");
    pending_bytes_ -= pending_.front().data.size();
    pending_.pop_front();
  }
  Pending p{.data = std::vector<std::byte>(bytes), .what = c.what_text()};
  if (bytes > 0) std::memcpy(p.data.data(), op.input, bytes);
  check_call(MPI_Isend(p.data.data(), count, datatype_of(op.dtype), op.peer, tag, comm_, &p.request),
             c, "MPI_Isend");
  pending_bytes_ += bytes;
  pending_.push_back(std::move(p));
}

void PointToPoint::recv(const Op& op, const WaitContext& c) {
  const int tag = checked_tag(op);
  const int count = mpi_count(op.count, op, "the count");
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  wait_until(
      [&] {
        int found = 0;
        check_call(MPI_Improbe(op.peer, MPI_ANY_TAG, comm_, &found, &message, &status), c,
                   "MPI_Improbe");
        return found != 0;
      },
      c);
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  const size_t expected = op.count * element_size(op.dtype);
  if (status.MPI_TAG != tag || got < 0 || static_cast<size_t>(got) != expected) {
    // [Checked receives] Drain the message, never into the output.
    std::vector<std::byte> sink(got > 0 ? static_cast<size_t>(got) : 1);
    MPI_Mrecv(sink.data(), got > 0 ? got : 0, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    throw MismatchError(detail::concat(
        "mpi backend: ", op.name(), " (", dtype_name(op.dtype), " x ", op.count, ", tag ", op.tag,
        ") on rank ", c.rank, " got a message with tag ", status.MPI_TAG, " and ", got,
        " bytes from rank ", op.peer, ", but expected tag ", op.tag, " and ", expected,
        " bytes. Per pair of ranks, sends and recvs match in issue order and must agree on the "
        "tag and the size"));
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_call(MPI_Imrecv(op.output, count, datatype_of(op.dtype), &message, &request), c,
             "MPI_Imrecv");
  wait_request(request, c, "MPI_Imrecv");
}

void PointToPoint::reap(const WaitContext& c) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    check_mpi(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), it->what, c.rank, "MPI_Isend");
    if (!done) {
      ++it;
      continue;
    }
    pending_bytes_ -= it->data.size();
    it = pending_.erase(it);
  }
}

void PointToPoint::drain(Deadline deadline) {
  while (!pending_.empty() && !deadline.expired()) {
    int done = 0;
    if (MPI_Test(&pending_.front().request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) {
      pending_bytes_ -= pending_.front().data.size();
      pending_.pop_front();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

}  // namespace lockstep::mpi
