// Whether the processes that share memory with this one are still alive, as the shm backend's
// segment and the p2p shared-memory channel both ask it: through a pidfd (Linux 5.3), which never
// mistakes a reused pid for the rank that died, else kill(pid, 0).
#pragma once

#include <cstdint>

namespace lockstep::shmem {

// A pidfd of pid, or -1 (errno: ESRCH when it is gone already; anything else, such as another
// pid namespace or an old kernel: it cannot be watched this way).
int open_pidfd(int pid);
// Whether the process of the pidfd has exited (a zombie or reaped). Never waits.
bool pidfd_exited(int pidfd);
// Whether pid no longer exists (kill(pid, 0) says ESRCH): for a peer without a pidfd.
bool pid_gone(int pid);
// This process's pid namespace (the inode of /proc/self/ns/pid; 0 if unknown): pids of processes
// in another one mean nothing here.
uint64_t pid_namespace();

}  // namespace lockstep::shmem
