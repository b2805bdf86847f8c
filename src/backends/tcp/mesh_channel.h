// MeshChannel: the p2p Channel of tcp and hier groups, over the connections of the group's mesh
// (mesh_links.h): the p2p stream to a peer travels as p2p frames on the one socket the
// collectives use (connection.h), so a rank holds one connection per peer whatever it runs.
//
// The mesh was connected and authenticated when the group was made (mesh.h): there is nothing to
// connect, listen to or accept here, and a write never blocks.
//
// Readiness: a connection's socket is polled for input only while its "readable" hint is off
// (read() turns it off when a recv comes up short); bytes the collectives sorted out for this
// stream wake the channel instead (Connection::attach_p2p). While the engine is idle
// (sleep_idle: no op pending) its reads leave a collective frame at a socket's head alone, and
// its sleeps stop watching that socket until the collectives have read: collective frames
// arriving between p2p ops then cost the p2p thread at most one wake-up and one peek, and
// never a copy. Once an op is pending (sleep) the reads go past such frames, keeping them for
// the collectives, so that a p2p message never waits for a collective (connection.h).
//
// Broken streams: an orderly end (close() writes kP2PStreamEnd after everything) is "rank R
// closed its end of the stream"; a socket that ends without it is a death, a reset or a peer's
// abort frame, each said as such, once every byte before it was read.
//
// Threads (channel.h [Threads]): sleep() polls descriptors that stay open as long as the
// connections live (the channel shares them); the wake callbacks come from either thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backends/tcp/mesh_links.h"
#include "comm/backend.h"
#include "comm/group_config.h"
#include "p2p/channel.h"

namespace lockstep::tcp {

class MeshChannel final : public p2p::Channel {
 public:
  MeshChannel(std::shared_ptr<MeshLinks> links, const GroupConfig& config);
  ~MeshChannel() override;
  MeshChannel(const MeshChannel&) = delete;
  MeshChannel& operator=(const MeshChannel&) = delete;

  const char* kind() const override { return "socket"; }
  size_t write(int peer, const std::byte* data, size_t bytes, Deadline deadline) override;
  size_t read(int peer, std::byte* data, size_t bytes) override;
  std::string broken(int peer) override;
  void service() override;
  void sleep(Clock::time_point until, std::span<const int> want_room) override;
  void sleep_idle(Clock::time_point until) override;
  void wake() override;
  void close() override;

 private:
  struct Peer {
    std::shared_ptr<Connection> conn;
    std::atomic<bool> readable{true};  // a recv may find something
    std::string write_error;           // why writing failed ("" while fine)
    std::string why;                   // broken()'s final answer, once known
  };

  Peer& peer_of(int peer);
  std::string prefix() const;
  std::string describe(int peer) const;
  void wait(Clock::time_point until, std::span<const int> want_room, bool idle);
  // Whether the engine is idle: set by sleep_idle, cleared by sleep and by wake() (every post
  // wakes the channel). Reads meanwhile leave collective frames where they are. Any thread.
  std::atomic<bool> idle_{false};
  void detach();

  std::shared_ptr<MeshLinks> links_;
  std::string group_;
  const int rank_;
  const int size_;
  std::unique_ptr<Peer[]> peers_;
  net::Fd wake_fd_;
  bool closed_ = false;
};

// The channel factory of the tcp and hier backends' table entries: a MeshChannel over the
// backend's peer_links().
std::unique_ptr<p2p::Channel> make_mesh_channel(const GroupConfig& config, const Backend& backend);

}  // namespace lockstep::tcp
