#include "shmem/processes.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace lockstep::shmem {

int open_pidfd(int pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

bool pidfd_exited(int pidfd) {
  pollfd fd{.fd = pidfd, .events = POLLIN};
  return ::poll(&fd, 1, 0) > 0;
}

bool pid_gone(int pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace lockstep::shmem
