// ShmChannel: the Channel of ranks on one host, over POSIX shared memory.
//
// [Inboxes] Each rank owns one inbox, a segment it creates in its constructor (shm_open, named
// "lockstep-p2p-<pid>-<random>") and publishes under store_key(config, "shm_inbox", rank) as
// "<pid> <pid namespace> <name>". An inbox (layout in src/p2p/shm_inbox.h) is a header (owner pid
// and rank, ring capacity, the stamp key, the bell, the sleeping count, the closed flag, the attach
// count), then a ring per sender (size - 1 of them): its control (head, written by the sender;
// tail, written by the owner, with the sender's wants_room flag; each on its own cache line) and
// its data (capacity bytes, a power of two, page-aligned). A writer maps only the controls of its
// peer's inbox and its own ring's data, which it reserves (fallocate) when it first connects, so
// that a full /dev/shm fails there and not with SIGBUS; a reader maps its own inbox whole.
// Untouched rings cost address space only. The name is unlinked as soon as every peer has mapped it
// (attach count), else at destruction; a rank that starts unlinks the inboxes of dead processes.
//
// [Streams] Ring s of inbox r is a single-producer single-consumer ring from s to r, holding the
// stream as chunks (layout in shm_inbox.h): each write() appends one chunk, stamped last
// (release), and the reader finds the next chunk by its stamp (acquire), so that a small message
// costs the reader one cache line, the one it was watching. tail (the reader's position, release)
// tells the writer how much room it has; head (the writer's, release) serves only sleep(). A
// chunk never wraps around the ring's end; positions run freely and wrap by masking.
//
// [Sleeping] sleep() reads the bell of its own inbox, raises the sleeping count (and wants_room
// in the rings it wants room in), re-checks (data in any ring, room in those rings, a pending
// wake()), then futex-waits on the bell while it still holds the value read, for at most 100 ms
// so that dead peers are noticed. A writer, after publishing head, re-reads the reader's
// sleeping count behind a full fence and rings (increments the bell and futex-wakes) only when
// it is non-zero; a reader, after publishing tail, does likewise with wants_room and rings the
// writer's bell. Either the sleeper sees the new data or the waker sees the sleeper: no lost
// wake-up, and no system call while nobody sleeps.
//
// [Liveness] broken(peer) reads the peer's closed flag (set by close() and by destruction) and,
// for a peer in another process of this pid namespace, a pidfd opened when its inbox was mapped.
// Ranks that are threads of this process (or whose pids mean nothing here) are judged by the
// closed flag alone.
//
// [Threads] write, read, broken and close run under the engine's lock; they alone touch the
// per-peer positions and map peers' inboxes (map_mu_ guards that). sleep() reads only shared
// counters and the parts of a mapped peer that never change once published, so it runs beside
// them; wake() only sets a flag and rings. Two sleep() calls at once that want room toward the
// same peer may leave the later one to its 100 ms cap.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/group_config.h"
#include "p2p/channel.h"
#include "p2p/shm_inbox.h"

namespace lockstep::p2p {

class ShmChannel : public Channel {
 public:
  static constexpr size_t kDefaultRingBytes = size_t{1} << 20;
  // Creates and publishes this rank's inbox (ConfigError when /dev/shm cannot hold it).
  // ring_bytes: the capacity of each ring of the inbox, a power of two (raised to the page size
  // if smaller); peers write into rings of the size their reader chose.
  explicit ShmChannel(const GroupConfig& config, size_t ring_bytes = kDefaultRingBytes);
  ~ShmChannel() override;
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  // Maps every peer's inbox (see Channel::connect_all).
  void connect_all(Deadline deadline) override;
  const char* kind() const override { return "shm"; }
  size_t write(int peer, const std::byte* data, size_t bytes, Deadline deadline) override;
  bool write_whole(int peer, const std::byte* data, size_t bytes, Deadline deadline) override;
  size_t read(int peer, std::byte* data, size_t bytes) override;
  bool lends_bytes() const override { return true; }
  std::span<const std::byte> peek(int peer) override;
  void consume(int peer, size_t bytes) override;
  bool maybe_unread() const override;
  std::string broken(int peer) override;
  void sleep(Clock::time_point until, std::span<const int> want_room) override;
  void wake() override;
  void close() override;

  // The /dev/shm name of this rank's inbox ("/lockstep-p2p-..."), for tests and messages.
  const std::string& inbox_name() const { return name_; }

 private:
  // A peer's inbox as this rank sees it. Published once (peers_[p]); after that only write()
  // changes data and fd, and only broken() dead and next_look.
  struct Mapped {
    inbox::Header* header = nullptr;
    size_t control_bytes = 0;
    inbox::RingControl* ring = nullptr;  // ring[me] in the peer's inbox
    std::byte* data = nullptr;           // its data; null until the first write
    uint64_t capacity = 0;
    uint64_t stamp_key = 0;  // of its inbox: the stamps of the chunks this rank writes there
    std::string name;
    int fd = -1;  // open until `data` is mapped
    int pid = 0;
    bool watch = false;        // another process in this pid namespace: its death shows
    int pidfd = -1;            // -1: not watched, or no pidfd (then kill(pid, 0))
    bool gone_at_map = false;  // the process had exited when its inbox was mapped
    bool dead = false;         // broken()'s last look, taken at most every 5 ms
    Clock::time_point next_look{};
  };
  struct Out {  // toward a peer: touched only by write()
    uint64_t head = 0;
    uint64_t tail_seen = 0;
  };
  struct In {              // from a peer: touched only by read()
    uint64_t next = 0;     // position of the next chunk, once the current one is read
    uint64_t at = 0;       // position of the current chunk's next unread byte
    uint64_t left = 0;     // its unread bytes
    bool touched = false;  // the ring's pages touched (inbox::touch_pages), on its first bytes
  };
  // What maybe_unread() watches in the ring from a sender, published by read(): the position of
  // the next chunk, or kPartial while a chunk has bytes left.
  static constexpr uint64_t kPartial = ~uint64_t{0};

  inbox::RingControl& my_ring(int sender) const {
    return inbox::ring_control(base_, inbox::slot(sender, me_));
  }
  std::byte* my_data(int sender) const {
    return base_ + header_->data_offset + inbox::slot(sender, me_) * capacity_;
  }
  // Makes the next chunk from `sender` the current one (In::at, left, next) if its stamp is there
  // and the current one is all read; false when there is none. NetworkError for a corrupt one.
  bool open_chunk(int sender);
  // After reads from `sender`: publishes what maybe_unread() watches and the room freed, and wakes
  // the writer if it sleeps for room.
  void published(int sender);
  // Whether the stream from `sender` has bytes read() has not taken. Lock-free.
  bool unread_from(int sender) const;
  // Where the next chunk from `sender` starts: its header, once its stamp is there.
  const inbox::ChunkHeader* chunk_at(int sender, uint64_t position) const {
    return reinterpret_cast<const inbox::ChunkHeader*>(my_data(sender) +
                                                       (position & (capacity_ - 1)));
  }
  // The peer's inbox mapped (controls only), waiting for its store key until deadline.
  // TimeoutError, or NetworkError (its inbox is gone: "rank 2 closed its end of the stream",
  // "... died"); quiet: null instead, except for that NetworkError.
  Mapped* map_peer(int peer, Deadline deadline, bool quiet);
  Mapped* mapped(int peer) const {
    return peers_[static_cast<size_t>(peer)].load(std::memory_order_acquire);
  }
  void map_ring(int peer, Mapped& m);
  // Free bytes in the ring toward a mapped peer, re-reading its tail when the cached one shows
  // less than `want`.
  uint64_t room(const Mapped& m, Out& o, size_t want) const;
  bool ready(std::span<const int> want_room) const;
  bool died(Mapped& m) const;
  std::string state_of(int peer);  // broken(), leaving out whether read() has more
  std::string who(int peer) const;
  void mark_closed();

  GroupConfig config_;
  int me_;
  int n_;
  int own_pid_;
  uint64_t own_ns_;
  std::string host_;
  std::string name_;
  std::byte* base_ = nullptr;  // my inbox
  size_t bytes_ = 0;
  inbox::Header* header_ = nullptr;
  uint64_t capacity_ = 0;
  bool closed_ = false;
  std::atomic<bool> wake_pending_{false};
  std::mutex map_mu_;  // serialises map_peer
  std::unique_ptr<std::atomic<Mapped*>[]> peers_;
  std::vector<Out> out_;
  std::vector<In> in_;
  std::unique_ptr<std::atomic<uint64_t>[]> poll_at_;  // per sender: see kPartial
  std::vector<Clock::time_point> next_try_;  // broken(): when to look up an unmapped peer again
};

}  // namespace lockstep::p2p
