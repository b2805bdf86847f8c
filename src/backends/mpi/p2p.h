// send and recv over the group's communicator.
//
// [Buffered sends] A send copies its input and starts MPI_Isend from the copy, then completes:
// like the tcp backend's socket buffers, this lets every rank of a ring send before it receives
// without a deadlock (an MPI send of a large message waits for the matching receive). Up to
// kMaxPendingBytes may be in flight; beyond that a send first waits for the oldest ones. Pending
// sends progress whenever this group runs an op, and shutdown waits for them.
//
// [Checked receives] A recv first probes the next message from its peer (MPI_Improbe, any tag;
// MPI keeps the order per pair), checks its tag and size, and only then receives it into the
// output. A message that does not match is drained into scratch memory and the recv fails with a
// MismatchError naming both; the output is never written with the wrong data.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "backends/mpi/mpi.h"
#include "backends/mpi/wait.h"
#include "comm/op.h"

namespace lockstep::mpi {

inline constexpr uint64_t kMaxPendingBytes = 64ull << 20;

// op.tag as an MPI tag; throws InvalidArgument when it is above MPI_TAG_UB.
int checked_tag(const Op& op);

class PointToPoint {
 public:
  explicit PointToPoint(MPI_Comm comm) : comm_(comm) {}
  // Hands any sends still pending to adopt_leftover().
  ~PointToPoint();

  void send(const Op& op, const WaitContext& context);
  void recv(const Op& op, const WaitContext& context);
  // Frees the buffers of sends that have completed. Throws when one of them failed.
  void reap(const WaitContext& context);
  // Waits for every pending send until the deadline (for shutdown). Never throws.
  void drain(Deadline deadline);

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> data;
    std::string what;
  };

  MPI_Comm comm_;
  std::deque<Pending> pending_;
  uint64_t pending_bytes_ = 0;
};

}  // namespace lockstep::mpi
