// Whether a process that shares memory with this one is alive (src/shmem/processes.h): a pidfd
// sees a child exit, even before it is reaped, and kill(pid, 0) sees it gone once reaped.
#include "shmem/processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace lockstep::testing {
namespace {

TEST(Processes, APidfdSeesAChildExitBeforeItIsReaped) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    char c;
    (void)!::read(go[0], &c, 1);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  const int fd = shmem::open_pidfd(child);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(shmem::pidfd_exited(fd)) << "it is still running";
  EXPECT_FALSE(shmem::pid_gone(child));
  (void)!::write(go[1], "x", 1);
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT);  // exited, not reaped
  EXPECT_TRUE(shmem::pidfd_exited(fd)) << "a zombie has exited";
  EXPECT_FALSE(shmem::pid_gone(child)) << "a zombie still has its pid";
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(shmem::pid_gone(child));
  EXPECT_TRUE(shmem::pidfd_exited(fd));
  ::close(fd);
  ::close(go[0]);
  ::close(go[1]);
}

TEST(Processes, ThisProcessHasAPidNamespace) {
  EXPECT_NE(shmem::pid_namespace(), 0u);
  EXPECT_EQ(shmem::pid_namespace(), shmem::pid_namespace());
}

}  // namespace
}  // namespace lockstep::testing
