#include "backends/mpi/block_exchange.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "backends/mpi/runtime.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

constexpr int kTag = 0;
constexpr size_t kDescriptorOffset = 8;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

BlockExchange::BlockExchange(MPI_Comm comm, int rank, int size, size_t capacity)
    : rank_(rank),
      size_(size),
      slot_bytes_(round_up(kBlockHeaderBytes + capacity, 64)),
      slots_(new std::byte[slot_bytes_ * static_cast<size_t>(size)]()),
      recvs_(static_cast<size_t>(size), MPI_REQUEST_NULL),
      received_(static_cast<size_t>(size), 0) {
  static_assert(sizeof(Descriptor) + kDescriptorOffset <= kBlockHeaderBytes);
  static_assert(kPieceBytes >= kBlockHeaderBytes);
  int code;
  {
    std::unique_lock<std::shared_mutex> changing(communicator_changes());
    code = MPI_Comm_dup(comm, &comm_);
  }
  if (code != MPI_SUCCESS)
    throw NetworkError(detail::concat("mpi backend: rank ", rank,
                                      " could not duplicate the group's communicator for its "
                                      "agreement blocks (MPI_Comm_dup): ",
                                      error_text(code)));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

BlockExchange::~BlockExchange() {
  free_communicator(comm_);
}

uint64_t BlockExchange::block_bytes(int r) const {
  uint64_t n;
  std::memcpy(&n, slot(r), sizeof n);
  return n;
}

size_t BlockExchange::payload_bytes(int r) const {
  return static_cast<size_t>(block_bytes(r) - kBlockHeaderBytes);
}

bool BlockExchange::post_next_piece(int r, const WaitContext& c) {
  const uint64_t got = received_[static_cast<size_t>(r)];
  // The first piece: as long as the slot allows; later ones: what the length says is left.
  const uint64_t total = got == 0 ? slot_bytes_ : block_bytes(r);
  if (got > 0 && got >= total) return false;
  const uint64_t piece = std::min<uint64_t>(kPieceBytes, total - got);
  check_call(MPI_Irecv(slot(r) + got, static_cast<int>(piece), MPI_BYTE, r, kTag, comm_,
                       &recvs_[static_cast<size_t>(r)]),
             c, "MPI_Irecv (agreement block)");
  return true;
}

bool BlockExchange::progress(const WaitContext& c) {
  for (int r = 0; r < size_ && recvs_left_ > 0; ++r) {
    MPI_Request& request = recvs_[static_cast<size_t>(r)];
    if (request == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Status status;
    check_call(MPI_Test(&request, &done, &status), c, "MPI_Test (agreement block)");
    if (!done) continue;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    uint64_t& got = received_[static_cast<size_t>(r)];
    const bool first = got == 0;
    got += static_cast<uint64_t>(std::max(count, 0));
    const uint64_t total = block_bytes(r);
    const bool valid = total >= kBlockHeaderBytes && total <= slot_bytes_ &&
                       (!first || got == std::min<uint64_t>(kPieceBytes, total));
    if (!valid)
      throw NetworkError(
          detail::concat("mpi backend: ", c.what_text(), " on rank ", c.rank, ": rank ", r,
                         " sent an agreement block that breaks the format (length ", total,
                         ", first piece ", count, " bytes, at most ", slot_bytes_,
                         " expected); is every rank running the same "
                         "lockstep?"));
    if (!post_next_piece(r, c)) --recvs_left_;
  }
  if (recvs_left_ > 0) return false;
  int done = 0;
  check_call(
      MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done, MPI_STATUSES_IGNORE), c,
      "MPI_Testall (agreement block sends)");
  return done != 0;
}

void BlockExchange::run(const Op& op, size_t payload_bytes, const WaitContext& c) {
  LOCKSTEP_ENFORCE(kBlockHeaderBytes + payload_bytes <= slot_bytes_, InvalidArgument,
                   "mpi backend: ", op.name(), ": a block payload of ", payload_bytes,
                   " bytes is above the exchange's capacity");
  const uint64_t total = kBlockHeaderBytes + payload_bytes;
  std::byte* mine = slot(rank_);
  std::memcpy(mine, &total, sizeof total);
  const Descriptor descriptor = describe(op);
  std::memcpy(mine + kDescriptorOffset, descriptor.data(), sizeof descriptor);
  try {
    recvs_left_ = 0;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      received_[static_cast<size_t>(r)] = 0;
      post_next_piece(r, c);
      ++recvs_left_;
    }
    sends_.clear();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      for (uint64_t at = 0; at < total; at += kPieceBytes) {
        sends_.push_back(MPI_REQUEST_NULL);
        check_call(
            MPI_Isend(mine + at, static_cast<int>(std::min<uint64_t>(kPieceBytes, total - at)),
                      MPI_BYTE, r, kTag, comm_, &sends_.back()),
            c, "MPI_Isend (agreement block)");
      }
    }
    wait_until([&] { return progress(c); }, c);
  } catch (const TimeoutError&) {
    const std::string missing = missing_ranks();
    abandon();
    throw TimeoutError(detail::concat(
        "mpi backend: ", c.what_text(), " on rank ", c.rank, " of group '", c.group,
        "' timed out: ", missing, " not reached it (no agreement block came from ",
        missing.find(',') == std::string::npos ? "it" : "them",
        "). Check that every rank calls the same collectives in the same order, and raise "
        "LOCKSTEP_TIMEOUT (or the op's timeout) if a rank is merely slow"));
  } catch (...) {
    abandon();
    throw;
  }
  descriptors_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    std::memcpy(descriptors_[static_cast<size_t>(r)].data(), slot(r) + kDescriptorOffset,
                sizeof(Descriptor));
  check_descriptors(op, descriptors_, c);
}

std::string BlockExchange::missing_ranks() const {
  std::string list;
  int count = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || recvs_[static_cast<size_t>(r)] == MPI_REQUEST_NULL) continue;
    list += detail::concat(count++ ? ", " : "", r);
  }
  return detail::concat(count == 1 ? "rank " : "ranks [", list, count == 1 ? " has" : "] have");
}

void BlockExchange::abandon() {
  bool pending = false;
  for (std::vector<MPI_Request>* requests : {&recvs_, &sends_})
    for (MPI_Request& r : *requests)
      if (r != MPI_REQUEST_NULL) {
        adopt_leftover(r);
        r = MPI_REQUEST_NULL;
        pending = true;
      }
  if (pending) {
    // MPI may still write into (or read from) the old slots: they are never freed.
    slots_.release();  // NOLINT(bugprone-unused-return-value): deliberately leaked
    slots_.reset(new std::byte[slot_bytes_ * static_cast<size_t>(size_)]());
  }
}

}  // namespace lockstep::mpi
