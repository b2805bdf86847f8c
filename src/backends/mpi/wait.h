// How the mpi backend waits: MPI's blocking calls cannot time out, so every op is a nonblocking
// MPI call whose request is tested until it completes, the op's deadline passes, or a peer
// reports an abort.
//
// [Waiting] On a host with a core for every rank, test without pause for the first kSpin (an MPI
// call that is about to complete needs no system call: a yield costs microseconds on some VMs).
// Then, and from the start on an oversubscribed host (more ranks than cores), test, then yield the
// core, for a while that grows with the bytes the op moves (MPI progresses a transfer only inside
// MPI calls, so a large transfer needs frequent tests); after that, sleep between tests, 20 us
// doubling up to 1 ms, so that a long wait for a slow peer costs almost no CPU. Every 100 ms the
// wait also looks for an abort note in the store: a peer that failed says so there, and this rank
// fails at once with the peer's reason.
#pragma once

#include <functional>
#include <string>

#include "backends/mpi/errors.h"
#include "backends/mpi/mpi.h"
#include "comm/op.h"
#include "lockstep/core/deadline.h"
#include "lockstep/store/store.h"

namespace lockstep::mpi {

// Who is waiting: for error messages and the abort note.
struct WaitContext {
  std::string what;        // what waits, when it is not an op
  const Op* op = nullptr;  // the op that waits: its describe() names it, built only on an error
  Deadline deadline;       // the op's deadline
  std::string group;       // the group's name (the abort note's key)
  int rank = 0;            // this rank in the group
  Store* store = nullptr;  // where peers leave abort notes; null: not watched
  uint64_t bytes = 0;      // bytes the op moves (sets the yield window)
  // Whether this host runs more of the job's ranks than it has cores (then a wait yields from the
  // start): detail::oversubscribed() of the group's local_world_size. Unknown counts as true.
  bool oversubscribed = true;

  // The op as Op::describe() puts it, or `what`.
  std::string what_text() const { return op ? op->describe() : what; }
};

// check_mpi for a call made while `context` waits: the op's text is built only for an error.
inline void check_call(int code, const WaitContext& context, const char* call) {
  if (code != MPI_SUCCESS) check_mpi(code, context.what_text(), context.rank, call);
}

// Calls poll() until it returns true. Throws TimeoutError when the deadline passes first, or
// the abort note's error when a peer aborted the group. An exception from poll() propagates.
void wait_until(const std::function<bool()>& poll, const WaitContext& context);

// Waits for request to complete; *status receives its status when given. A failed test throws
// the error check_mpi names. On a throw, the request is handed to adopt_leftover().
void wait_request(MPI_Request& request, const WaitContext& context, const char* call,
                  MPI_Status* status = nullptr);

}  // namespace lockstep::mpi
