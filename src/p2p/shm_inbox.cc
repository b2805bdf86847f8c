#include "p2p/shm_inbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::p2p::inbox {

namespace {

constexpr uint64_t kMagic = 0x6c6b7370'3270'6962ull;  // "lksp2pib"
constexpr uint32_t kVersion = 2;
constexpr const char* kPrefix = "lockstep-p2p-";

void* map(int fd, size_t bytes, uint64_t offset, int extra_flags = 0) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | extra_flags, fd,
                   static_cast<off_t>(offset));
  return p == MAP_FAILED ? nullptr : p;
}

uint64_t data_offset(int size) {
  const size_t controls = static_cast<size_t>(std::max(size - 1, 0)) * sizeof(RingControl);
  const size_t page = page_size();
  return (kControlOffset + controls + page - 1) / page * page;
}

}  // namespace

size_t page_size() {
  return static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string make_name() {
  std::random_device rd;
  const uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char tail[48];
  std::snprintf(tail, sizeof tail, "%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(token));
  return std::string("/") + kPrefix + tail;
}

void sweep_stale() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + std::strlen(kPrefix));
    if (pid > 0 && pid_gone(pid)) ::shm_unlink(("/" + name).c_str());
  }
  ::closedir(dir);
}

std::byte* create(const std::string& name, int rank, int size, int pid, uint64_t capacity,
                  size_t& bytes, const std::string& where) {
  const uint64_t offset = data_offset(size);
  bytes = offset + static_cast<size_t>(std::max(size - 1, 0)) * capacity;
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw ConfigError(detail::concat(where, ": cannot create the shared-memory inbox /dev/shm",
                                     name, ": ", net::errno_text(errno),
                                     ". Fix: check that /dev/shm is mounted and writable"));
  // Sparse: only the header and the controls are reserved now, each ring by its writer.
  int error = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (error == 0) error = ::posix_fallocate(fd, 0, static_cast<off_t>(offset));
  void* base = error == 0 ? map(fd, bytes, 0) : nullptr;
  if (error == 0 && !base) error = errno;
  ::close(fd);
  if (!base) {
    ::shm_unlink(name.c_str());
    throw ConfigError(detail::concat(where, ": cannot size or map the shared-memory inbox /dev/shm",
                                     name, " (", bytes, " bytes): ", net::errno_text(error),
                                     ". Fix: free space in /dev/shm or enlarge it"));
  }
  auto* h = new (base) Header();
  h->magic = kMagic;
  h->version = kVersion;
  h->rank = rank;
  h->size = size;
  h->pid = pid;
  h->pid_ns = pid_namespace();
  h->capacity = capacity;
  h->data_offset = offset;
  h->total_bytes = bytes;
  std::random_device rd;
  do h->stamp_key = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  while (h->stamp_key == 0);
  for (size_t s = 0; s + 1 < static_cast<size_t>(size); ++s)
    new (&ring_control(base, s)) RingControl();
  return static_cast<std::byte*>(base);
}

Header* map_control(int fd, int rank, int size, size_t& control_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kControlOffset) return nullptr;
  auto* h = static_cast<Header*>(map(fd, kControlOffset, 0));
  if (!h) return nullptr;
  const bool ok = h->magic == kMagic && h->version == kVersion && h->rank == rank &&
                  h->size == size && h->total_bytes == static_cast<uint64_t>(st.st_size) &&
                  h->data_offset == data_offset(size);
  ::munmap(h, kControlOffset);
  control_bytes = data_offset(size);
  return ok ? static_cast<Header*>(map(fd, control_bytes, 0)) : nullptr;
}

std::byte* map_ring(int fd, const Header& header, size_t slot, int& error) {
  const uint64_t offset = header.data_offset + slot * header.capacity;
  error = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(header.capacity));
  if (error != 0) return nullptr;
  // Populated: a page fault costs tens of microseconds on some VMs, and a ring's first lap would
  // otherwise take one every few messages.
  void* p = map(fd, header.capacity, offset, MAP_POPULATE);
  if (!p) error = errno;
  return static_cast<std::byte*>(p);
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts{.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000),
              .tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000)};
  // EAGAIN (the bell rang already), EINTR, ETIMEDOUT: the caller re-checks in every case.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void ring_bell(Header& header) {
  header.bell.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header.bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

bool pid_gone(int pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

int open_pidfd(int pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

bool pidfd_exited(int pidfd) {
  pollfd fd{.fd = pidfd, .events = POLLIN};
  return ::poll(&fd, 1, 0) > 0;
}

}  // namespace lockstep::p2p::inbox

namespace lockstep::p2p::inbox {

void touch_pages(std::byte* data, size_t bytes, bool for_write) {
  const size_t page = page_size();
  for (size_t at = 0; at < bytes; at += page) {
    if (for_write) {  // before any data: an atomic or of 0 changes nothing
      __atomic_fetch_or(reinterpret_cast<unsigned char*>(data + at), 0, __ATOMIC_RELAXED);
    } else {
      (void)*static_cast<volatile const std::byte*>(data + at);
    }
  }
}

}  // namespace lockstep::p2p::inbox
