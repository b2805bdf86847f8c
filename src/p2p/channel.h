// Channel: the byte streams under the point-to-point engine (src/p2p/engine.h). Between this rank
// and each peer of a group there are two ordered, reliable streams, one per direction. The engine
// frames its messages on them (src/p2p/frames.h); a channel only moves bytes.
//
// Implementations: MeshChannel (tcp and hier groups: p2p frames on the mesh's own connections,
// src/backends/tcp/mesh_channel.h), ShmChannel (shm groups: one shared-memory inbox per rank, with
// a ring per sender), and the mpi backend's MPI channel.
//
// [Threads] The engine calls write, read, broken and service under its own lock, so never two at
// once; but sleep() runs on the engine's thread without that lock, concurrently with those calls
// (from a waiter that drives progress itself), and wake() may come from any thread at any time.
// Implementations guard what sleep() shares with the other calls.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "lockstep/core/deadline.h"

namespace lockstep::p2p {

class Channel {
 public:
  virtual ~Channel() = default;
  // "socket", "shm", "mpi": for messages.
  virtual const char* kind() const = 0;
  // Appends up to `bytes` bytes of `data` to the stream to `peer`; returns how many it took (0:
  // no room now). Never blocks, except that the first write to a peer may first connect to it,
  // waiting at most until `deadline` (TimeoutError or NetworkError naming the peer when that
  // fails).
  virtual size_t write(int peer, const std::byte* data, size_t bytes, Deadline deadline) = 0;
  // Appends all `bytes` bytes, or none (false: no room now, or the channel cannot promise it).
  // The engine's fast path for small sends. Default: false.
  virtual bool write_whole(int /*peer*/, const std::byte* /*data*/, size_t /*bytes*/,
                           Deadline /*deadline*/) {
    return false;
  }
  // Takes up to `bytes` bytes of the stream from `peer` into `data`; returns how many (0: nothing
  // now). Never blocks. Bytes a peer wrote before its stream broke are still returned first.
  virtual size_t read(int peer, std::byte* data, size_t bytes) = 0;
  // Whether peek() lends bytes. Default: false (the engine only reads).
  virtual bool lends_bytes() const { return false; }
  // Where lends_bytes(): the bytes from `peer` that read() would return next, as far as they lie
  // in one piece in the channel (empty only when there are none): the engine parses a small
  // frame in place and takes it with one consume(). Valid until the next call for peer.
  virtual std::span<const std::byte> peek(int /*peer*/) { return {}; }
  // Takes `bytes` of what peek(peer) showed, as a read() of them would. Default: nothing (only
  // called after a non-empty peek).
  virtual void consume(int /*peer*/, size_t /*bytes*/) {}
  // Whether some peer may have written bytes that read() has not taken yet: false only when
  // surely none has. Lock-free and safe from any thread: a waiter's poll loop asks it between
  // progress rounds without the engine's lock, and takes the lock only when it says true.
  // Default: true (always look).
  virtual bool maybe_unread() const { return true; }
  // Why the streams with `peer` are unusable, "" while they are fine: "rank 1 (pid 4711 on
  // node-b) died", "rank 1 closed its end of the stream". Only once read() has nothing more.
  virtual std::string broken(int peer) = 0;
  // Collective over the group (every rank calls it once, after making its channel): makes contact
  // with every peer now rather than on first write, where the medium allows (shm: maps every
  // peer's inbox, so that the names leave /dev/shm while the group lives and every peer's death
  // is watched from the start). Default: nothing.
  virtual void connect_all(Deadline /*deadline*/) {}
  // Housekeeping that needs the engine's lock: accepting peers' new connections, noticing dead
  // peers. Called once per progress round. Default: nothing.
  virtual void service() {}
  // Waits until something may have changed (bytes from a peer, room toward a peer listed in
  // `want_room`, a new connection, a broken stream, or wake()), or until `until`. May return
  // early for no reason; never waits past `until`.
  virtual void sleep(Clock::time_point until, std::span<const int> want_room) = 0;
  // sleep() while the engine has nothing pending: no op posted, nothing to write. Bytes may still
  // come (a peer's send before this rank posts the recv), but nobody waits for them yet, so a
  // channel that must poll for them may poll rarely; wake() still ends it at once. Default:
  // sleep(until, {}).
  virtual void sleep_idle(Clock::time_point until) { sleep(until, {}); }
  // Makes the sleep() in progress, or else the next one, return at once. Any thread.
  virtual void wake() = 0;
  // The engine is leaving (Engine::close): what it writes from now on are its goodbyes, to peers
  // that may have left already. A write that must first connect to a peer that refuses
  // connections (its listener is gone: it left) may then fail at once instead of waiting for
  // the peer to come back. Default: nothing.
  virtual void closing() {}
  // Orderly close: the peers' read() gets everything written so far, then broken() says this
  // rank closed. Called once, last.
  virtual void close() = 0;
};

}  // namespace lockstep::p2p

namespace lockstep {
struct GroupConfig;
}

namespace lockstep::p2p {

// The store key under which a channel publishes what its peers need to reach `rank` (an address,
// a segment name): "p2p/<group>/<what>/<rank>".
std::string store_key(const GroupConfig& config, const std::string& what, int rank);

}  // namespace lockstep::p2p
