// MemoryChannel: a p2p::Channel (p2p/channel.h) between ranks of one process, over the links of
// a FaultController, so that tests steer when the engine's bytes arrive. One per rank's engine.
//
// Streams: each write() (or write_whole()) is one packet on the link to the peer, taken whole:
// there is always room, so write() never returns 0 and sleep() ignores want_room. read() returns
// the packets' bytes in order, across packet boundaries. Holding a link holds whole writes: an
// engine frame of up to 512 bytes is one write, a larger one its header and then its payload
// (p2p/engine.cc), so a test can release a frame's header and cut the link before its payload.
//
// broken(peer): "" while bytes remain to read; then, when the link with the peer was cut, the
// FaultController's cut reason ("the link between rank 0 and rank 1 was cut by the fault
// controller"); when the peer closed (its end packet is next), "rank P closed its end of the
// stream", as the mesh channel says. write() toward a cut link throws NetworkError whose text is
// the cut reason alone, so that the engine's error for a send is the same whether its write or
// broken() saw the cut first.
//
// [Threads] As p2p/channel.h says: write, read, broken, service and close under the engine's
// lock; sleep() concurrently with them and wake() from any thread, which share only atomics
// here and the FaultController (thread-safe).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "p2p/channel.h"
#include "testing/fault_controller.h"

namespace lockstep::testing {

class MemoryChannel final : public p2p::Channel {
 public:
  MemoryChannel(std::shared_ptr<FaultController> faults, int rank);

  const char* kind() const override { return "memory"; }
  size_t write(int peer, const std::byte* data, size_t bytes, Deadline deadline) override;
  bool write_whole(int peer, const std::byte* data, size_t bytes, Deadline deadline) override;
  size_t read(int peer, std::byte* data, size_t bytes) override;
  std::string broken(int peer) override;
  // Remembers the epoch it looked at: a change after it ends the next sleep().
  void service() override;
  // Returns at the first change of the FaultController since the last service() (a packet
  // delivered, a release, a cut, any endpoint's wake), at wake(), or at `until`.
  void sleep(Clock::time_point until, std::span<const int> want_room) override;
  void wake() override;
  // An end packet to every peer.
  void close() override;

 private:
  struct Inbound {
    std::vector<std::byte> bytes;  // the packet being read
    size_t offset = 0;
    bool ended = false;  // the peer's end packet was taken
  };

  void check_peer(int peer) const;

  std::shared_ptr<FaultController> faults_;
  const int rank_;
  std::vector<Inbound> in_;
  bool closed_ = false;
  std::atomic<uint64_t> seen_{0};
  std::atomic<bool> woken_{false};
};

}  // namespace lockstep::testing
