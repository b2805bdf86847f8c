#include "p2p/shm_inbox.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include "lockstep/core/error.h"
#include "net/socket.h"
#include "shmem/futex.h"
#include "shmem/processes.h"
#include "shmem/shared_file.h"

namespace lockstep::p2p::inbox {

namespace {

constexpr uint64_t kMagic = 0x6c6b7370'3270'6962ull;  // "lksp2pib"
constexpr uint32_t kVersion = 2;

uint64_t data_offset(int size) {
  const size_t controls = static_cast<size_t>(std::max(size - 1, 0)) * sizeof(RingControl);
  const size_t page = page_size();
  return (kControlOffset + controls + page - 1) / page * page;
}

}  // namespace

size_t page_size() {
  return static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

std::string make_name() {
  return "/" + shmem::shared_file_name("p2p");
}

std::byte* create(const std::string& name, int rank, int size, int pid, uint64_t capacity,
                  size_t& bytes, const std::string& where) {
  const uint64_t offset = data_offset(size);
  bytes = offset + static_cast<size_t>(std::max(size - 1, 0)) * capacity;
  // Sparse: only the header and the controls are reserved now, each ring by its writer.
  const shmem::CreatedFile c = shmem::create_shared_file(name.substr(1), bytes, offset, false);
  if (!c.created)
    throw ConfigError(detail::concat(where, ": cannot create the shared-memory inbox /dev/shm",
                                     name, ": ", net::errno_text(c.error),
                                     ". Fix: check that /dev/shm is mounted and writable"));
  if (!c.base)
    throw ConfigError(detail::concat(where, ": cannot size or map the shared-memory inbox /dev/shm",
                                     name, " (", bytes, " bytes): ", net::errno_text(c.error),
                                     ". Fix: free space in /dev/shm or enlarge it"));
  void* base = c.base;
  auto* h = new (base) Header();
  h->magic = kMagic;
  h->version = kVersion;
  h->rank = rank;
  h->size = size;
  h->pid = pid;
  h->pid_ns = shmem::pid_namespace();
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
  auto* h = static_cast<Header*>(shmem::map_shared(fd, kControlOffset, 0));
  if (!h) return nullptr;
  const bool ok = h->magic == kMagic && h->version == kVersion && h->rank == rank &&
                  h->size == size && h->total_bytes == static_cast<uint64_t>(st.st_size) &&
                  h->data_offset == data_offset(size);
  ::munmap(h, kControlOffset);
  control_bytes = data_offset(size);
  return ok ? static_cast<Header*>(shmem::map_shared(fd, control_bytes, 0)) : nullptr;
}

std::byte* map_ring(int fd, const Header& header, size_t slot, int& error) {
  const uint64_t offset = header.data_offset + slot * header.capacity;
  error = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(header.capacity));
  if (error != 0) return nullptr;
  // Populated: a page fault costs tens of microseconds on some VMs, and a ring's first lap would
  // otherwise take one every few messages.
  void* p = shmem::map_shared(fd, header.capacity, offset, MAP_POPULATE);
  if (!p) error = errno;
  return static_cast<std::byte*>(p);
}

void ring_bell(Header& header) {
  header.bell.fetch_add(1, std::memory_order_release);
  shmem::futex_wake_all(header.bell);
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
