#include "shmem/shared_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/log.h"
#include "shmem/processes.h"

namespace lockstep::shmem {

std::string shared_file_name(std::string_view kind) {
  std::string clean;
  for (char c : kind.substr(0, 100)) clean += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  std::random_device rd;
  const uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char tail[48];
  std::snprintf(tail, sizeof tail, "-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(token));
  return kSharedPrefix + clean + tail;
}

std::string shared_file_path(const std::string& name) {
  return std::string(kSharedDir) + "/" + name;
}

void sweep_stale_files() {
  DIR* dir = ::opendir(kSharedDir);
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(kSharedPrefix, 0) != 0) continue;
    // The creator's pid is the second-to-last field.
    const size_t last = name.rfind('-');
    const size_t before =
        last == std::string::npos || last == 0 ? std::string::npos : name.rfind('-', last - 1);
    if (before == std::string::npos) continue;
    const int pid = std::atoi(name.substr(before + 1, last - before - 1).c_str());
    if (pid > 0 && pid_gone(pid) && ::unlinkat(::dirfd(dir), name.c_str(), 0) == 0)
      log_warning("removed ", kSharedDir, "/", name, ": its creator (pid ", pid,
                  ") died before its peers had mapped it");
  }
  ::closedir(dir);
}

void* map_shared(int fd, size_t bytes, size_t offset, int extra_flags) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | extra_flags, fd,
                   static_cast<off_t>(offset));
  return p == MAP_FAILED ? nullptr : p;
}

CreatedFile create_shared_file(const std::string& name, size_t bytes, size_t reserve,
                               bool populate) {
  CreatedFile out;
  const std::string path = shared_file_path(name);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    out.error = errno;
    return out;
  }
  out.created = true;
  int error = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (error == 0 && reserve > 0) error = ::posix_fallocate(fd, 0, static_cast<off_t>(reserve));
  void* base = error == 0 ? map_shared(fd, bytes, 0, populate ? MAP_POPULATE : 0) : nullptr;
  if (error == 0 && !base) error = errno;
  ::close(fd);
  if (!base) {
    ::unlink(path.c_str());
    out.error = error;
    return out;
  }
  out.base = base;
  return out;
}

}  // namespace lockstep::shmem
