// Guardian: a small helper process whose only job is to kill the ranks' process groups if the
// launcher dies without cleaning up (even by SIGKILL, which the launcher cannot catch).
//
// [Why a helper] PR_SET_PDEATHSIG kills a rank when the launcher dies, but not the processes
// that rank started (a shell's children, a data-loader's workers). The guardian holds the read
// end of a pipe from the launcher; the kernel closes the write end when the launcher dies, and
// the guardian then SIGKILLs every process group still registered. When the launcher exits
// normally it dismisses the guardian first.
//
// Not thread-safe: use from the launcher's main thread. Construct before any other thread starts
// (the helper is forked from this process).
#pragma once

#include <sys/types.h>

#include "net/socket.h"

namespace lockstep::launcher {

class Guardian {
 public:
  Guardian();   // forks the helper; throws Error if it cannot
  ~Guardian();  // dismisses the helper (it kills nothing) and reaps it
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  // Registers a process group to kill if the launcher dies.
  void watch(pid_t pgid);
  // Unregisters a group the launcher has cleaned up itself.
  void forget(pid_t pgid);

 private:
  void send(int32_t message);
  pid_t pid_ = -1;
  net::Fd pipe_;  // write end
};

}  // namespace lockstep::launcher
