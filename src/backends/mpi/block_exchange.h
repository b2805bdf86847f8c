// BlockExchange: how the mpi backend starts every collective in a group of up to kDirectRanks
// ranks. Each rank sends one block to every other rank, straight with MPI_Isend/MPI_Irecv on a
// communicator of the exchange's own (a duplicate of the group's), and receives theirs:
//
//   [0, 8)      the block's length in bytes, header included
//   [8, 72)     the rank's Descriptor of its call (agreement.h)
//   [72, 128)   zero
//   [128, ...)  the op's data, when the op is small enough to travel in the blocks (piggyback.h)
//
// A block goes out in pieces of at most kPieceBytes, so that every message stays within Open MPI's
// shared-memory eager limit (btl_vader_eager_limit: 4096 bytes, its own header included); larger
// messages take the rendezvous protocol (Open MPI's own 4 KiB ping-pong: 8.2 us, against 1.8 us at
// 2 KiB). Pieces of 4032 bytes beat pieces of 2048 (4 KiB all_reduce: 2.5-3.3 against 3.9-5.3 us).
// The first piece carries the length; the receiver posts the rest once it has read it,
// so blocks of different lengths (ranks that disagree) never truncate or desynchronise: every
// rank receives every block whole, then compares the descriptors, so a disagreement is the same
// MismatchError on every rank before a byte of data is used.
//
// Direct messages cost each rank size-1 sends and receives: beyond kDirectRanks ranks, the
// backend exchanges descriptors with MPI_Iallgather instead (agreement.h) and moves no data in
// blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/mpi/agreement.h"
#include "backends/mpi/mpi.h"
#include "backends/mpi/wait.h"

namespace lockstep::mpi {

inline constexpr int kDirectRanks = 16;
inline constexpr size_t kBlockHeaderBytes = 128;
inline constexpr size_t kPieceBytes = 4032;

class BlockExchange {
 public:
  // Collective over the group: duplicates comm. capacity: the largest block payload.
  BlockExchange(MPI_Comm comm, int rank, int size, size_t capacity);
  ~BlockExchange();
  BlockExchange(const BlockExchange&) = delete;
  BlockExchange& operator=(const BlockExchange&) = delete;

  // Where this rank's payload goes before run(): `bytes` (at most capacity) of it.
  std::byte* own_payload() { return slot(rank_) + kBlockHeaderBytes; }

  // Sends this rank's block (descriptor of op, then `payload_bytes` from own_payload()) to every
  // other rank and receives theirs; returns once all have arrived and all sends completed.
  // Throws MismatchError when a rank's descriptor differs (check_descriptors), NetworkError for a
  // block that breaks the format or the peers' abort note (wait.h), TimeoutError at the deadline,
  // naming the ranks whose blocks did not come.
  void run(const Op& op, size_t payload_bytes, const WaitContext& context);

  // After run(): rank r's payload and its length.
  const std::byte* payload(int r) const { return slot(r) + kBlockHeaderBytes; }
  size_t payload_bytes(int r) const;

 private:
  std::byte* slot(int r) const { return slots_.get() + static_cast<size_t>(r) * slot_bytes_; }
  uint64_t block_bytes(int r) const;
  // Posts the next receive of the block from r; false when the block is whole.
  bool post_next_piece(int r, const WaitContext& context);
  // Tests the pending requests; true once every block is whole and every send done.
  bool progress(const WaitContext& context);
  // "rank 3 has", "ranks [1, 2] have": the ranks whose block is not whole.
  std::string missing_ranks() const;
  // After a throw: the requests still pending stay with MPI (adopt_leftover), and so does the
  // memory they may still write or read.
  void abandon();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_;
  int size_;
  size_t slot_bytes_;
  std::unique_ptr<std::byte[]> slots_;  // one slot per rank, 64-byte multiples
  std::vector<MPI_Request> recvs_;      // per rank: its pending piece
  std::vector<uint64_t> received_;      // per rank: bytes of its block received so far
  std::vector<MPI_Request> sends_;
  std::vector<Descriptor> descriptors_;
  size_t recvs_left_ = 0;
};

}  // namespace lockstep::mpi
