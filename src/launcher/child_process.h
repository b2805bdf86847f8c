// Starting one rank: fork + execve with stdout and stderr on pipes the launcher reads.
//
// [Child lifetime] Each child leads its own process group (so the launcher can signal the child
// and everything it started), and asks the kernel for SIGKILL when the launcher dies
// (PR_SET_PDEATHSIG), checking getppid() afterwards for the case where the launcher died before
// the request took effect. The Guardian (guardian.h) covers the child's descendants.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "net/socket.h"

namespace lockstep::launcher {

struct ChildSpec {
  std::string path;               // resolved program path (execve does no PATH search)
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // "NAME=value" strings: the whole environment
};

struct StartedChild {
  pid_t pid = -1;  // also the child's process group id
  net::Fd out;     // read end of the child's stdout (close-on-exec, non-blocking)
  net::Fd err;     // read end of the child's stderr
};

// Starts the child and returns once it has exec'd. Must be called from the thread that stays
// alive for the children's lifetime (the main thread): PDEATHSIG fires when that thread exits.
// Throws Error naming the program and the errno text when pipe, fork or exec fails.
StartedChild start_child(const ChildSpec& spec);

// Sends sig to the child's whole process group (ignores a group that is already gone).
void signal_group(pid_t pgid, int sig);

}  // namespace lockstep::launcher
