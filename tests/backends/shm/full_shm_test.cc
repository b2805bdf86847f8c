// A full /dev/shm: a child process mounts a 1 MiB tmpfs over /dev/shm in its own mount namespace
// (it runs as root; elsewhere the test is skipped) and creates a 2-rank shm group there. Both
// ranks must fail at setup with an error naming the size needed and the free space.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>

#include "backends/shm/layout.h"
#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "net/socket.h"
#include "shm_test_util.h"
#include "support/child_mode.h"
#include "support/spawn.h"
#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

// Child: a private 1 MiB /dev/shm, then a 2-rank group on it. Prints one line per rank.
TEST(ShmFullChild, DISABLED_Main) {
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
    say("SKIP cannot mount a private tmpfs: " + net::errno_text(errno));
    return;
  }
  auto store = std::make_shared<HashStore>();
  spawn(2, [&](int rank) {
    try {
      init_process_group({.backend = "shm",
                          .rank = rank,
                          .world_size = 2,
                          .store = store,
                          .timeout = std::chrono::seconds(10)});
      say(detail::concat("RANK ", rank, " NO ERROR"));
    } catch (const std::exception& e) {
      say(detail::concat("RANK ", rank, " CAUGHT ", error_type(e), ": ", e.what()));
    }
  });
}

TEST(ShmFull, FullDevShmNamesTheSizeNeededAndTheFreeSpace) {
  auto result = run_process(child_argv("ShmFullChild.DISABLED_Main"), {}, std::chrono::seconds(60));
  if (contains(result.output, "SKIP")) GTEST_SKIP() << result.output;
  const std::string needed = std::to_string(shm::layout_for(2).total) + " bytes";
  SCOPED_TRACE(result.output);
  EXPECT_TRUE(contains(result.output,
                       "RANK 0 CAUGHT ConfigError: group 'default': the shm backend "
                       "needs a shared-memory segment of " +
                           needed));
  EXPECT_TRUE(contains(result.output, "only 1048576 bytes (1.0 MiB) of 1.0 MiB is free there"));
  EXPECT_TRUE(contains(result.output, "--shm-size"));
  // Rank 1 hears it from rank 0 through the store, at once rather than at the timeout.
  EXPECT_TRUE(contains(result.output,
                       "RANK 1 CAUGHT ConfigError: rank 0 could not set up the "
                       "shared-memory segment: group 'default': the shm backend "
                       "needs a shared-memory segment of " +
                           needed));
  // The real /dev/shm was never touched.
  EXPECT_EQ(segments_of_this_process(), std::vector<std::string>{});
}

}  // namespace
}  // namespace lockstep::testing
