// The files in /dev/shm that ranks share (src/shmem/shared_file.h): the name carries the creator's
// pid, a file whose creator died is swept and a live creator's is not, and creation is exclusive,
// sized and mapped, leaving nothing behind when it fails.
#include "shmem/shared_file.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace lockstep::testing {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(SharedFile, TheNameCarriesTheKindAndTheCreatorsPid) {
  const std::string a = shmem::shared_file_name("default/1");
  const std::string prefix = "lockstep-default_1-" + std::to_string(::getpid()) + "-";
  EXPECT_EQ(a.rfind(prefix, 0), 0u) << a;
  EXPECT_EQ(a.size(), prefix.size() + 16) << a;
  EXPECT_NE(a, shmem::shared_file_name("default/1")) << "two files of one kind get two names";
  EXPECT_EQ(shmem::shared_file_path(a), "/dev/shm/" + a);
}

TEST(SharedFile, AFileWhoseCreatorDiedIsSweptAndALiveCreatorsIsKept) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = "/dev/shm/lockstep-test_sweep-" + std::to_string(dead) + "-0000dead";
  const std::string live = shmem::shared_file_path(shmem::shared_file_name("test_sweep"));
  std::ofstream(stale) << "left behind";
  std::ofstream(live) << "in use";
  shmem::sweep_stale_files();
  EXPECT_FALSE(exists(stale)) << stale;
  EXPECT_TRUE(exists(live)) << live;
  ::unlink(stale.c_str());
  ::unlink(live.c_str());
}

TEST(SharedFile, CreationIsExclusiveSizedAndMapped) {
  const std::string name = shmem::shared_file_name("test_create");
  const size_t bytes = 3 * 4096;
  const shmem::CreatedFile c = shmem::create_shared_file(name, bytes, 4096, false);
  ASSERT_NE(c.base, nullptr) << c.error;
  struct stat st {};
  ASSERT_EQ(::stat(shmem::shared_file_path(name).c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), bytes);
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, 4096u) << "the reserved bytes are allocated";
  static_cast<char*>(c.base)[bytes - 1] = 'x';  // the whole file is mapped
  const shmem::CreatedFile again = shmem::create_shared_file(name, bytes, 0, false);
  EXPECT_EQ(again.base, nullptr);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.error, EEXIST);
  EXPECT_TRUE(exists(shmem::shared_file_path(name))) << "a refused creation removes nothing";
  ::munmap(c.base, bytes);
  ::unlink(shmem::shared_file_path(name).c_str());
}

}  // namespace
}  // namespace lockstep::testing
