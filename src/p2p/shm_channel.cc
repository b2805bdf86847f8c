#include "p2p/shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>

#include "core/coarse_clock.h"
#include "lockstep/core/error.h"
#include "net/socket.h"
#include "shmem/futex.h"
#include "shmem/processes.h"
#include "shmem/shared_file.h"

namespace lockstep::p2p {

using inbox::ring_bell;
using inbox::slot;

namespace {

constexpr auto kMaxSleep = std::chrono::milliseconds(100);
// How much of a chunk read() prefetches when it finds one: a small message whole.
constexpr uint64_t kPrefetchBytes = 512;

}  // namespace

ShmChannel::ShmChannel(const GroupConfig& config, size_t ring_bytes)
    : config_(config),
      me_(config.rank),
      n_(config.size),
      own_pid_(static_cast<int>(::getpid())),
      own_ns_(shmem::pid_namespace()),
      host_(host_name_of(config)),
      peers_(new std::atomic<Mapped*>[static_cast<size_t>(std::max(config.size, 1))]),
      out_(static_cast<size_t>(std::max(config.size, 1))),
      in_(static_cast<size_t>(std::max(config.size, 1))),
      poll_at_(new std::atomic<uint64_t>[static_cast<size_t>(std::max(config.size, 1))]),
      next_try_(static_cast<size_t>(std::max(config.size, 1)), Clock::time_point{}) {
  LOCKSTEP_ENFORCE(config.store && me_ >= 0 && me_ < n_, InvalidArgument, "ShmChannel of group '",
                   config.name, "': rank ", me_, " of ", n_,
                   config.store ? "" : " without a store");
  LOCKSTEP_ENFORCE(std::has_single_bit(ring_bytes), InvalidArgument, "ShmChannel of group '",
                   config.name, "': ring size ", ring_bytes, " is not a power of two");
  for (int p = 0; p < n_; ++p) {
    peers_[static_cast<size_t>(p)].store(nullptr);
    poll_at_[static_cast<size_t>(p)].store(0);
  }
  capacity_ = std::max<uint64_t>(ring_bytes, inbox::page_size());
  shmem::sweep_stale_files();  // inboxes whose creator died before every peer mapped them
  name_ = inbox::make_name();
  base_ = inbox::create(name_, me_, n_, own_pid_, capacity_, bytes_,
                        detail::concat("group '", config.name, "' rank ", me_));
  header_ = reinterpret_cast<inbox::Header*>(base_);
  try {
    config.store->set(store_key(config, "shm_inbox", me_),
                      detail::concat(own_pid_, " ", own_ns_, " ", name_));
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

std::string ShmChannel::who(int peer) const {
  return detail::concat("group '", config_.name, "' rank ", me_, ": rank ", peer);
}

ShmChannel::Mapped* ShmChannel::map_peer(int peer, Deadline deadline, bool quiet) {
  std::lock_guard lock(map_mu_);
  if (Mapped* m = mapped(peer)) return m;
  std::string value;
  try {
    value = config_.store->get(store_key(config_, "shm_inbox", peer), deadline.remaining());
  } catch (const TimeoutError& e) {
    if (quiet) return nullptr;
    throw TimeoutError(detail::concat(who(peer), " never published its shared-memory inbox (",
                                      e.what(), "). Fix: check that rank ", peer,
                                      " started and made its group"));
  } catch (const Error& e) {
    if (quiet) return nullptr;
    throw NetworkError(
        detail::concat(who(peer), ": cannot look up its shared-memory inbox: ", e.what()));
  }
  auto m = std::make_unique<Mapped>();
  unsigned long long ns = 0;
  char name[256] = {};
  if (std::sscanf(value.c_str(), "%d %llu %255s", &m->pid, &ns, name) != 3) {
    if (quiet) return nullptr;
    throw NetworkError(
        detail::concat(who(peer), ": its store entry '", value, "' is not a shared-memory inbox"));
  }
  m->name = name;
  m->watch = m->pid != own_pid_ && ns == own_ns_;
  const int fd = ::shm_open(m->name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    // ENOENT: its owner destroyed its channel (the name goes last), or died and was swept.
    const int error = errno;
    if (quiet && error != ENOENT) return nullptr;
    throw NetworkError(
        error != ENOENT ? detail::concat(who(peer), ": cannot open its inbox /dev/shm", m->name,
                                         ": ", net::errno_text(error))
        : m->watch && shmem::pid_gone(m->pid)
            ? detail::concat("rank ", peer, " (pid ", m->pid, " on ", host_, ") died")
            : detail::concat("rank ", peer, " closed its end of the stream"));
  }
  m->header = inbox::map_control(fd, peer, n_, m->control_bytes);
  if (!m->header) {
    ::close(fd);
    if (quiet) return nullptr;
    throw NetworkError(detail::concat(who(peer), ": /dev/shm", m->name,
                                      " is not its inbox for this group of ", n_,
                                      " (do all ranks run the same lockstep build?)"));
  }
  m->fd = fd;  // kept until write() maps the ring: the name may go before that
  m->capacity = m->header->capacity;
  m->stamp_key = m->header->stamp_key;
  m->ring = &inbox::ring_control(m->header, slot(me_, peer));
  if (m->watch) {
    m->pidfd = shmem::open_pidfd(m->pid);
    m->gone_at_map = m->pidfd < 0 && errno == ESRCH;
  }
  if (m->header->attached.fetch_add(1) + 1 == static_cast<uint32_t>(n_ - 1))
    ::shm_unlink(m->name.c_str());  // every peer has it now
  Mapped* raw = m.release();
  peers_[static_cast<size_t>(peer)].store(raw, std::memory_order_release);
  return raw;
}

void ShmChannel::connect_all(Deadline deadline) {
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    try {
      map_peer(p, deadline, false);
    } catch (const NetworkError&) {
      // The peer has already left (a fast rank that destroyed its group): the first write to it,
      // or broken(), says so; making this group must not fail for it.
    }
  }
}

void ShmChannel::map_ring(int peer, Mapped& m) {
  int error = 0;
  m.data = inbox::map_ring(m.fd, *m.header, slot(me_, peer), error);
  if (!m.data)
    throw NetworkError(detail::concat(who(peer), ": cannot reserve its ring of ", m.capacity,
                                      " bytes in /dev/shm", m.name, ": ", net::errno_text(error),
                                      ". Fix: free space in /dev/shm or enlarge it"));
  inbox::touch_pages(m.data, m.capacity, true);
  ::close(m.fd);
  m.fd = -1;
}

size_t ShmChannel::write(int peer, const std::byte* data, size_t bytes, Deadline deadline) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  Mapped* m = mapped(peer);
  if (!m || !m->data) [[unlikely]] {
    if (!m) m = map_peer(peer, deadline, false);
    map_ring(peer, *m);
  }
  if (bytes == 0) return 0;
  Out& o = out_[static_cast<size_t>(peer)];
  // One chunk at head, in the room there is, up to the ring's end (head is chunk-aligned).
  const uint64_t at = o.head & (m->capacity - 1);
  const uint64_t span = std::min(room(*m, o, inbox::chunk_span(bytes)), m->capacity - at) /
                        inbox::kChunkAlign * inbox::kChunkAlign;
  if (span < inbox::chunk_span(1)) return 0;
  const size_t n =
      static_cast<size_t>(std::min<uint64_t>(bytes, span - sizeof(inbox::ChunkHeader)));
  auto* chunk = reinterpret_cast<inbox::ChunkHeader*>(m->data + at);
  std::memcpy(m->data + at + sizeof(inbox::ChunkHeader), data, n);
  chunk->bytes = n;
  __atomic_store_n(&chunk->stamp, inbox::chunk_stamp(o.head, m->stamp_key), __ATOMIC_RELEASE);
  o.head += inbox::chunk_span(n);
  m->ring->head.store(o.head, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (m->header->sleeping.load(std::memory_order_relaxed) != 0) ring_bell(*m->header);
  return n;
}

uint64_t ShmChannel::room(const Mapped& m, Out& o, size_t want) const {
  uint64_t free = m.capacity - (o.head - o.tail_seen);
  if (free < want) {  // the cached tail is stale: read the reader's
    o.tail_seen = m.ring->tail.load(std::memory_order_acquire);
    free = m.capacity - (o.head - o.tail_seen);
  }
  return free;
}

bool ShmChannel::write_whole(int peer, const std::byte* data, size_t bytes, Deadline deadline) {
  const uint64_t span = inbox::chunk_span(bytes);
  Mapped* m = mapped(peer);
  if (m && m->data) {
    Out& o = out_[static_cast<size_t>(peer)];
    if (room(*m, o, span) < span || m->capacity - (o.head & (m->capacity - 1)) < span) return false;
  } else if (span > inbox::page_size()) {
    return false;  // a first write goes into an empty ring of at least a page
  }
  // Room for one chunk of all of it: write takes it whole.
  return write(peer, data, bytes, deadline) == bytes;
}

bool ShmChannel::open_chunk(int sender) {
  In& i = in_[static_cast<size_t>(sender)];
  if (i.left > 0) return true;
  const inbox::ChunkHeader* chunk = chunk_at(sender, i.next);
  if (__atomic_load_n(&chunk->stamp, __ATOMIC_ACQUIRE) !=
      inbox::chunk_stamp(i.next, header_->stamp_key))
    return false;
  const uint64_t length = chunk->bytes;
  const uint64_t at = i.next & (capacity_ - 1);
  if (length == 0 || inbox::chunk_span(length) > capacity_ - at) [[unlikely]]
    throw NetworkError(detail::concat(who(sender), " wrote a chunk of ", length,
                                      " bytes at offset ", at, " of a ring of ", capacity_,
                                      ": its shared-memory stream is corrupt. Restart the job"));
  std::byte* ring = my_data(sender);
  if (!i.touched) [[unlikely]] {
    inbox::touch_pages(ring, capacity_, false);
    i.touched = true;
  }
  // The chunk's next lines are complete too: fetch them while its start is being parsed.
  const uint64_t span = std::min<uint64_t>(inbox::chunk_span(length), kPrefetchBytes);
  for (uint64_t line = inbox::kChunkAlign; line < span; line += inbox::kChunkAlign)
    __builtin_prefetch(ring + at + line);
  i.at = i.next + sizeof(inbox::ChunkHeader);
  i.left = length;
  i.next += inbox::chunk_span(length);
  return true;
}

void ShmChannel::published(int sender) {
  const In& i = in_[static_cast<size_t>(sender)];
  poll_at_[static_cast<size_t>(sender)].store(i.left > 0 ? kPartial : i.next,
                                              std::memory_order_relaxed);
  // Room for the writer: everything before the current chunk's next unread byte.
  inbox::RingControl& r = my_ring(sender);
  r.tail.store(i.left > 0 ? i.at : i.next, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (r.wants_room.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    // The writer published its inbox before it wrote: the look-up does not wait.
    Mapped* m = mapped(sender);
    if (!m) {
      try {
        m = map_peer(sender, Deadline::after(std::chrono::seconds(1)), true);
      } catch (const Error&) {  // it is gone: nobody to wake
      }
    }
    if (m) ring_bell(*m->header);
  }
}

size_t ShmChannel::read(int peer, std::byte* data, size_t bytes) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  In& i = in_[static_cast<size_t>(peer)];
  const std::byte* ring = my_data(peer);
  size_t n = 0;
  while (n < bytes && open_chunk(peer)) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(i.left, bytes - n));
    std::memcpy(data + n, ring + (i.at & (capacity_ - 1)), k);
    n += k;
    i.at += k;
    i.left -= k;
  }
  if (n > 0) published(peer);
  return n;
}

std::span<const std::byte> ShmChannel::peek(int peer) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  if (!open_chunk(peer)) return {};
  const In& i = in_[static_cast<size_t>(peer)];
  return {my_data(peer) + (i.at & (capacity_ - 1)), static_cast<size_t>(i.left)};
}

void ShmChannel::consume(int peer, size_t bytes) {
  In& i = in_[static_cast<size_t>(peer)];
  LOCKSTEP_ENFORCE(bytes <= i.left, InvalidArgument, who(peer), ": consume(", bytes, ") past the ",
                   i.left, " bytes peek() showed");
  i.at += bytes;
  i.left -= bytes;
  published(peer);
}

bool ShmChannel::unread_from(int sender) const {
  const uint64_t next = poll_at_[static_cast<size_t>(sender)].load(std::memory_order_relaxed);
  return next == kPartial || __atomic_load_n(&chunk_at(sender, next)->stamp, __ATOMIC_ACQUIRE) ==
                                 inbox::chunk_stamp(next, header_->stamp_key);
}

bool ShmChannel::maybe_unread() const {
  for (int s = 0; s < n_; ++s)
    if (s != me_ && unread_from(s)) return true;
  return false;
}

bool ShmChannel::died(Mapped& m) const {
  if (!m.watch || m.dead) return m.dead;
  // A system call per look: at most one every 5 ms, as broken() may be called every round.
  const auto now = coarse_now();  // on every progress round: the cheap clock
  if (now < m.next_look) return false;
  m.next_look = now + std::chrono::milliseconds(5);
  m.dead = m.gone_at_map || (m.pidfd < 0 ? shmem::pid_gone(m.pid) : shmem::pidfd_exited(m.pidfd));
  return m.dead;
}

std::string ShmChannel::broken(int peer) {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < n_ && peer != me_, InvalidArgument, who(peer),
                   " is not a peer in a group of ", n_);
  std::string why = state_of(peer);
  // Then whether read() has more: what the peer wrote before it closed (or died) is visible now.
  if (!why.empty() && unread_from(peer)) return "";
  return why;
}

std::string ShmChannel::state_of(int peer) {
  Mapped* m = mapped(peer);
  if (!m) {
    // Look the peer up at most every 50 ms: the store may be a round trip away.
    auto& next = next_try_[static_cast<size_t>(peer)];
    const auto now = Clock::now();
    if (now < next) return "";
    next = now + std::chrono::milliseconds(50);
    try {
      if (!config_.store->check({store_key(config_, "shm_inbox", peer)})) return "";
    } catch (const Error&) {
      return "";  // the store's trouble, not the peer's
    }
    try {
      m = map_peer(peer, Deadline::after(std::chrono::seconds(1)), true);
    } catch (const NetworkError& e) {
      return e.what();  // its inbox is gone: it closed or died
    }
    if (!m) return "";
  }
  if (m->header->closed.load(std::memory_order_acquire))
    return detail::concat("rank ", peer, " closed its end of the stream");
  if (died(*m)) return detail::concat("rank ", peer, " (pid ", m->pid, " on ", host_, ") died");
  return "";
}

bool ShmChannel::ready(std::span<const int> want_room) const {
  if (wake_pending_.load(std::memory_order_relaxed) || maybe_unread()) return true;
  for (int p : want_room) {
    const Mapped* m = p >= 0 && p < n_ && p != me_ ? mapped(p) : nullptr;
    if (!m) return true;  // nothing written to it yet: room
    // Room for a chunk of at least a byte (write() takes nothing with less).
    const uint64_t tail = m->ring->tail.load(std::memory_order_acquire);
    if (m->capacity - (m->ring->head.load(std::memory_order_relaxed) - tail) >=
        inbox::chunk_span(1))
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
    shmem::futex_wait(header_->bell, seq, std::min<Clock::duration>(until - now, kMaxSleep));
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
