#include "p2p/shm_channel.h"

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
#include <bit>
#include <climits>
#include <cstring>
#include <new>
#include <random>

#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::p2p {

struct ShmChannel::InboxHeader {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = 0;
  int32_t size = 0;
  int32_t pid = 0;
  uint64_t capacity = 0;     // of each ring
  uint64_t data_offset = 0;  // of ring 0's data; page-aligned
  uint64_t total_bytes = 0;
  alignas(64) std::atomic<uint32_t> bell{0};
  std::atomic<uint32_t> sleeping{0};   // sleep() calls in progress
  alignas(64) std::atomic<uint32_t> closed{0};
  std::atomic<uint32_t> attached{0};   // peers that mapped this inbox
};

struct ShmChannel::RingControl {
  alignas(64) std::atomic<uint64_t> head{0};  // the sender's
  std::atomic<uint32_t> wants_room{0};        // the sender sleeps until there is room
  alignas(64) std::atomic<uint64_t> tail{0};  // the owner's
};

namespace {

constexpr uint64_t kMagic = 0x6c6b7370'3270'6962ull;  // "lksp2pib"
constexpr uint32_t kVersion = 1;
constexpr size_t kControlOffset = 256;
constexpr const char* kPrefix = "lockstep-p2p-";
constexpr auto kMaxSleep = std::chrono::milliseconds(100);

static_assert(sizeof(ShmChannel::InboxHeader) <= kControlOffset);
static_assert(sizeof(ShmChannel::RingControl) == 128);
static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// Futex calls on words of a MAP_SHARED mapping: the shared (not PRIVATE) forms, so that the
// kernel keys them by page and a waker in another process (or another mapping) finds the waiter.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts{.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000),
              .tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void ring_bell(ShmChannel::InboxHeader& h) {
  h.bell.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h.bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

size_t page_size() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

uint64_t data_offset_for(int size) {
  return round_up(kControlOffset + static_cast<size_t>(std::max(size - 1, 0)) *
                                       sizeof(ShmChannel::RingControl),
                  page_size());
}

// The ring of `sender` in the inbox of `owner`: ranks in order, skipping the owner.
size_t slot(int sender, int owner) {
  return static_cast<size_t>(sender < owner ? sender : sender - 1);
}

bool pid_gone(int pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// Removes inboxes whose creator has died (their peers never all mapped them).
void sweep_stale() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    int pid = std::atoi(name.c_str() + std::strlen(kPrefix));
    if (pid > 0 && pid_gone(pid)) ::shm_unlink(("/" + name).c_str());
  }
  ::closedir(dir);
}

std::string make_name() {
  std::random_device rd;
  uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char tail[48];
  std::snprintf(tail, sizeof tail, "%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(token));
  return std::string("/") + kPrefix + tail;
}

void* map(int fd, size_t bytes, uint64_t offset) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(offset));
  return p == MAP_FAILED ? nullptr : p;
}

void copy_in(std::byte* ring, uint64_t capacity, uint64_t pos, const std::byte* src, size_t n) {
  size_t at = static_cast<size_t>(pos & (capacity - 1));
  size_t first = std::min<size_t>(n, static_cast<size_t>(capacity) - at);
  std::memcpy(ring + at, src, first);
  if (n > first) std::memcpy(ring, src + first, n - first);
}

void copy_out(const std::byte* ring, uint64_t capacity, uint64_t pos, std::byte* dst, size_t n) {
  size_t at = static_cast<size_t>(pos & (capacity - 1));
  size_t first = std::min<size_t>(n, static_cast<size_t>(capacity) - at);
  std::memcpy(dst, ring + at, first);
  if (n > first) std::memcpy(dst + first, ring, n - first);
}

}  // namespace

ShmChannel::ShmChannel(const GroupConfig& config, size_t ring_bytes)
    : config_(config),
      me_(config.rank),
      n_(config.size),
      own_pid_(static_cast<int>(::getpid())),
      host_(host_name_of(config)),
      peers_(new std::atomic<Mapped*>[static_cast<size_t>(std::max(config.size, 1))]),
      out_(static_cast<size_t>(std::max(config.size, 1))),
      in_(static_cast<size_t>(std::max(config.size, 1))),
      next_try_(static_cast<size_t>(std::max(config.size, 1)), Clock::time_point{}) {
  LOCKSTEP_ENFORCE(config.store && me_ >= 0 && me_ < n_, InvalidArgument,
                   "ShmChannel of group '", config.name, "': rank ", me_, " of ", n_,
                   config.store ? "" : " without a store");
  LOCKSTEP_ENFORCE(std::has_single_bit(ring_bytes), InvalidArgument, "ShmChannel of group '",
                   config.name, "': ring size ", ring_bytes, " is not a power of two");
  for (int p = 0; p < n_; ++p) peers_[static_cast<size_t>(p)].store(nullptr);
  capacity_ = std::max<uint64_t>(ring_bytes, page_size());
  const uint64_t data_offset = data_offset_for(n_);
  bytes_ = data_offset + static_cast<size_t>(n_ - 1) * capacity_;

  sweep_stale();
  name_ = make_name();
  const std::string where = "group '" + config.name + "' rank " + std::to_string(me_);
  int fd = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw ConfigError(detail::concat(where, ": cannot create the shared-memory inbox /dev/shm",
                                     name_, ": ", net::errno_text(errno),
                                     ". Fix: check that /dev/shm is mounted and writable"));
  int error = ::ftruncate(fd, static_cast<off_t>(bytes_)) == 0 ? 0 : errno;
  if (error == 0) error = ::posix_fallocate(fd, 0, static_cast<off_t>(data_offset));
  if (error == 0) {
    base_ = static_cast<std::byte*>(map(fd, bytes_, 0));
    if (!base_) error = errno;
  }
  ::close(fd);
  if (error != 0) {
    ::shm_unlink(name_.c_str());
    throw ConfigError(detail::concat(where, ": cannot size or map the shared-memory inbox /dev/shm",
                                     name_, " (", bytes_, " bytes): ", net::errno_text(error),
                                     ". Fix: free space in /dev/shm or enlarge it"));
  }
  header_ = new (base_) InboxHeader();
  header_->magic = kMagic;
  header_->version = kVersion;
  header_->rank = me_;
  header_->size = n_;
  header_->pid = own_pid_;
  header_->capacity = capacity_;
  header_->data_offset = data_offset;
  header_->total_bytes = bytes_;
  for (int s = 0; s < n_ - 1; ++s)
    new (base_ + kControlOffset + static_cast<size_t>(s) * sizeof(RingControl)) RingControl();
  try {
    config.store->set(store_key(config, "shm_inbox", me_), std::to_string(own_pid_) + " " + name_);
  } catch (...) {
    ::munmap(base_, bytes_);
    ::shm_unlink(name_.c_str());
    throw;
  }
}

ShmChannel::~ShmChannel() {
  if (!closed_) mark_closed();
  for (int p = 0; p < n_; ++p) {
    Mapped* m = mapped(p);
    if (!m) continue;
    if (m->data) ::munmap(m->data, m->capacity);
    ::munmap(m->header, m->control_bytes);
    if (m->pidfd >= 0) ::close(m->pidfd);
    if (m->fd >= 0) ::close(m->fd);
    delete m;
  }
  ::munmap(base_, bytes_);
  ::shm_unlink(name_.c_str());  // ENOENT when the last peer to map it unlinked it already
}

ShmChannel::RingControl& ShmChannel::my_ring(int sender) const {
  return *reinterpret_cast<RingControl*>(base_ + kControlOffset +
                                         slot(sender, me_) * sizeof(RingControl));
}

std::byte* ShmChannel::my_data(int sender) const {
  return base_ + header_->data_offset + slot(sender, me_) * capacity_;
}

std::string ShmChannel::who(int peer) const {
  return detail::concat("group '", config_.name, "' rank ", me_, ": rank ", peer);
}

ShmChannel::Mapped* ShmChannel::map_peer(int peer, Deadline deadline, bool quiet) {
  std::lock_guard lock(map_mu_);
  if (Mapped* m = mapped(peer)) return m;
  const std::string key = store_key(config_, "shm_inbox", peer);
  std::string value;
  try {
    value = config_.store->get(key, deadline.remaining());
  } catch (const TimeoutError& e) {
    if (quiet) return nullptr;
    throw TimeoutError(detail::concat(who(peer), " never published its shared-memory inbox (",
                                      e.what(), "). Fix: check that rank ", peer,
                                      " started and made its group"));
  } catch (const Error& e) {
    if (quiet) return nullptr;
    throw NetworkError(detail::concat(who(peer), ": cannot look up its shared-memory inbox: ",
                                      e.what()));
  }
  auto m = std::make_unique<Mapped>();
  m->pid = std::atoi(value.c_str());
  const size_t space = value.find(' ');
  m->name = space == std::string::npos ? value : value.substr(space + 1);
  int fd = ::shm_open(m->name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    // Its owner destroyed its channel (the name goes last), or died and was swept.
    int error = errno;
    if (quiet && error != ENOENT) return nullptr;
    throw NetworkError(
        error != ENOENT ? detail::concat(who(peer), ": cannot open its inbox /dev/shm", m->name,
                                         ": ", net::errno_text(error))
        : m->pid != own_pid_ && pid_gone(m->pid)
            ? detail::concat("rank ", peer, " (pid ", m->pid, " on ", host_, ") died")
            : detail::concat("rank ", peer, " closed its end of the stream"));
  }
  struct stat st {};
  auto* h = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kControlOffset
                ? static_cast<InboxHeader*>(map(fd, kControlOffset, 0))
                : nullptr;
  const bool ok = h && h->magic == kMagic && h->version == kVersion && h->rank == peer &&
                  h->size == n_ && h->total_bytes == static_cast<uint64_t>(st.st_size);
  const uint64_t control_bytes = ok ? h->data_offset : 0;
  if (h) ::munmap(h, kControlOffset);
  h = ok ? static_cast<InboxHeader*>(map(fd, control_bytes, 0)) : nullptr;
  if (!h) {
    ::close(fd);
    if (quiet) return nullptr;
    throw NetworkError(detail::concat(who(peer), ": /dev/shm", m->name,
                                      " is not its inbox for this group of ", n_,
                                      " (do all ranks run the same lockstep build?)"));
  }
  m->fd = fd;  // kept until write() maps the ring's data: the name may go before that
  m->header = h;
  m->control_bytes = control_bytes;
  m->capacity = h->capacity;
  m->ring = reinterpret_cast<RingControl*>(reinterpret_cast<std::byte*>(h) + kControlOffset +
                                           slot(me_, peer) * sizeof(RingControl));
  if (m->pid != own_pid_) {
    m->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, m->pid, 0));
    m->gone_at_map = m->pidfd < 0 && errno == ESRCH;
  }
  if (h->attached.fetch_add(1) + 1 == static_cast<uint32_t>(n_ - 1))
    ::shm_unlink(m->name.c_str());  // every peer has it now
  Mapped* raw = m.release();
  peers_[static_cast<size_t>(peer)].store(raw, std::memory_order_release);
  return raw;
}

void ShmChannel::map_data(int peer, Mapped& m) {
  const uint64_t offset = m.header->data_offset + slot(me_, peer) * m.capacity;
  int error =
      ::posix_fallocate(m.fd, static_cast<off_t>(offset), static_cast<off_t>(m.capacity));
  if (error == 0) {
    m.data = static_cast<std::byte*>(map(m.fd, m.capacity, offset));
    if (!m.data) error = errno;
  }
  if (error != 0)
    throw NetworkError(detail::concat(who(peer), ": cannot map its ring of ", m.capacity,
                                      " bytes in /dev/shm", m.name, ": ", net::errno_text(error),
                                      ". Fix: free space in /dev/shm or enlarge it"));
  ::close(m.fd);
  m.fd = -1;
}

size_t ShmChannel::write(int peer, const std::byte* data, size_t bytes, Deadline deadline) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  Mapped* m = mapped(peer);
  if (!m || !m->data) [[unlikely]] {
    if (!m) m = map_peer(peer, deadline, false);
    map_data(peer, *m);
  }
  Out& o = out_[static_cast<size_t>(peer)];
  uint64_t room = m->capacity - (o.head - o.tail_seen);
  if (room < bytes) {
    o.tail_seen = m->ring->tail.load(std::memory_order_acquire);
    room = m->capacity - (o.head - o.tail_seen);
  }
  const size_t n = static_cast<size_t>(std::min<uint64_t>(room, bytes));
  if (n == 0) return 0;
  copy_in(m->data, m->capacity, o.head, data, n);
  o.head += n;
  m->ring->head.store(o.head, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (m->header->sleeping.load(std::memory_order_relaxed) != 0) ring_bell(*m->header);
  return n;
}

size_t ShmChannel::read(int peer, std::byte* data, size_t bytes) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  RingControl& r = my_ring(peer);
  In& i = in_[static_cast<size_t>(peer)];
  uint64_t avail = i.head_seen - i.tail;
  if (avail < bytes) {
    i.head_seen = r.head.load(std::memory_order_acquire);
    avail = i.head_seen - i.tail;
  }
  const size_t n = static_cast<size_t>(std::min<uint64_t>(avail, bytes));
  if (n == 0) return 0;
  copy_out(my_data(peer), capacity_, i.tail, data, n);
  i.tail += n;
  r.tail.store(i.tail, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (r.wants_room.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    // The writer published its inbox before it wrote: the look-up does not wait.
    Mapped* m = mapped(peer);
    if (!m) {
      try {
        m = map_peer(peer, Deadline::after(std::chrono::seconds(1)), true);
      } catch (const Error&) {  // it is gone: nobody to wake
      }
    }
    if (m) ring_bell(*m->header);
  }
  return n;
}

bool ShmChannel::died(Mapped& m) const {
  if (m.pid == own_pid_ || m.dead) return m.dead;
  // A system call per look: at most one every 5 ms, as broken() may be called every round.
  const auto now = Clock::now();
  if (now < m.next_look) return false;
  m.next_look = now + std::chrono::milliseconds(5);
  pollfd fd{.fd = m.pidfd, .events = POLLIN};
  m.dead = m.gone_at_map || (m.pidfd < 0 ? pid_gone(m.pid) : ::poll(&fd, 1, 0) > 0);
  return m.dead;
}

std::string ShmChannel::broken(int peer) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  RingControl& r = my_ring(peer);
  if (r.head.load(std::memory_order_acquire) != r.tail.load(std::memory_order_relaxed)) return "";
  Mapped* m = mapped(peer);
  if (!m) {
    // Look the peer up at most every 50 ms: the store may be a round trip away.
    auto& next = next_try_[static_cast<size_t>(peer)];
    const auto now = Clock::now();
    if (now < next) return "";
    next = now + std::chrono::milliseconds(50);
    try {
      if (!config_.store->check({store_key(config_, "shm_inbox", peer)})) return "";
      m = map_peer(peer, Deadline::after(std::chrono::seconds(1)), true);
    } catch (const NetworkError& e) {
      return e.what();  // its inbox is gone: it closed or died
    } catch (const Error&) {
      return "";
    }
    if (!m) return "";
  }
  if (m->header->closed.load(std::memory_order_acquire))
    return detail::concat("rank ", peer, " closed its end of the stream");
  if (died(*m)) return detail::concat("rank ", peer, " (pid ", m->pid, " on ", host_, ") died");
  return "";
}

bool ShmChannel::ready(std::span<const int> want_room) const {
  if (wake_pending_.load(std::memory_order_relaxed)) return true;
  for (int s = 0; s < n_; ++s) {
    if (s == me_) continue;
    const RingControl& r = my_ring(s);
    if (r.head.load(std::memory_order_acquire) != r.tail.load(std::memory_order_relaxed))
      return true;
  }
  for (int p : want_room) {
    const Mapped* m = p >= 0 && p < n_ && p != me_ ? mapped(p) : nullptr;
    if (!m) return true;  // nothing written to it yet: room
    if (m->ring->head.load(std::memory_order_relaxed) -
            m->ring->tail.load(std::memory_order_acquire) < m->capacity)
      return true;
  }
  return false;
}

void ShmChannel::sleep(Clock::time_point until, std::span<const int> want_room) {
  const uint32_t seq = header_->bell.load(std::memory_order_acquire);
  header_->sleeping.fetch_add(1, std::memory_order_relaxed);
  for (int p : want_room)
    if (const Mapped* m = p >= 0 && p < n_ && p != me_ ? mapped(p) : nullptr)
      m->ring->wants_room.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const auto now = Clock::now();
  if (until > now && !ready(want_room))
    futex_wait(header_->bell, seq, std::min<Clock::duration>(until - now, kMaxSleep));
  wake_pending_.store(false, std::memory_order_relaxed);
  for (int p : want_room)
    if (const Mapped* m = p >= 0 && p < n_ && p != me_ ? mapped(p) : nullptr)
      m->ring->wants_room.store(0, std::memory_order_relaxed);
  header_->sleeping.fetch_sub(1, std::memory_order_release);
}

void ShmChannel::wake() {
  wake_pending_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->sleeping.load(std::memory_order_relaxed) != 0) ring_bell(*header_);
}

void ShmChannel::mark_closed() {
  closed_ = true;
  header_->closed.store(1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int p = 0; p < n_; ++p)
    if (Mapped* m = mapped(p)) ring_bell(*m->header);
}

void ShmChannel::close() {
  if (!closed_) mark_closed();
}

}  // namespace lockstep::p2p
