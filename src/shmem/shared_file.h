// The files in /dev/shm that the ranks of a host share: the shm backend's segments and
// allocations, the p2p shared-memory channel's inboxes. One naming scheme, which carries the
// creator's pid so that a file whose creator died before its peers unlinked it is found and
// removed (sweep_stale_files), and one way to create a file: exclusively, sized, its first bytes
// reserved up front (a full /dev/shm is a clear error at once, never a SIGBUS later), mapped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep::shmem {

inline constexpr const char* kSharedDir = "/dev/shm";
inline constexpr const char* kSharedPrefix = "lockstep-";

// "lockstep-<kind>-<pid>-<random>": a file name in kSharedDir (kind's characters other than
// letters and digits as '_', at most 100 of them).
std::string shared_file_name(std::string_view kind);
// "/dev/shm/<name>".
std::string shared_file_path(const std::string& name);
// Removes every "lockstep-*" file of kSharedDir whose creator (the pid in its name) no longer
// exists, with a warning naming it.
void sweep_stale_files();

struct CreatedFile {
  void* base = nullptr;  // the mapping of the whole file; null on failure (nothing is left)
  int error = 0;         // on failure: errno
  bool created = false;  // on failure: whether the file could be created at all (else sizing or
                         // mapping it failed: ENOSPC is a full /dev/shm)
};
// Creates kSharedDir/<name> exclusively (mode 0600), `bytes` long, reserves its first `reserve`
// bytes (the rest stays sparse until someone reserves it) and maps it whole, with MAP_POPULATE
// when `populate`.
CreatedFile create_shared_file(const std::string& name, size_t bytes, size_t reserve,
                               bool populate);
// Maps `bytes` of the open file fd from `offset` (MAP_SHARED, read and write; extra_flags such as
// MAP_POPULATE); null on failure (errno set).
void* map_shared(int fd, size_t bytes, size_t offset, int extra_flags = 0);

}  // namespace lockstep::shmem
