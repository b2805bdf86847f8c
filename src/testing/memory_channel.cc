#include "testing/memory_channel.h"

#include <algorithm>
#include <cstring>

#include "lockstep/core/error.h"

namespace lockstep::testing {

MemoryChannel::MemoryChannel(std::shared_ptr<FaultController> faults, int rank)
    : faults_(std::move(faults)), rank_(rank), in_(static_cast<size_t>(faults_->size())) {}

void MemoryChannel::check_peer(int peer) const {
  if (peer < 0 || peer >= faults_->size() || peer == rank_)
    throw InvalidArgument(detail::concat("memory channel of rank ", rank_, ": no peer ", peer));
}

size_t MemoryChannel::write(int peer, const std::byte* data, size_t bytes, Deadline deadline) {
  return write_whole(peer, data, bytes, deadline) ? bytes : 0;
}

bool MemoryChannel::write_whole(int peer, const std::byte* data, size_t bytes, Deadline) {
  check_peer(peer);
  if (closed_)
    throw InvalidArgument(detail::concat("memory channel of rank ", rank_, ": write to rank ", peer,
                                         " after the channel was closed"));
  if (bytes == 0) return false;
  if (faults_->send(rank_, peer, std::vector<std::byte>(data, data + bytes)) ==
      FaultController::Fate::refused)
    throw NetworkError(faults_->cut_reason(rank_, peer));
  return true;
}

size_t MemoryChannel::read(int peer, std::byte* data, size_t bytes) {
  check_peer(peer);
  Inbound& in = in_[static_cast<size_t>(peer)];
  size_t got = 0;
  while (got < bytes && !in.ended) {
    if (in.offset == in.bytes.size()) {
      auto p = faults_->take(peer, rank_);
      if (!p) break;
      if (p->end) {
        in.ended = true;
        break;
      }
      in.bytes = std::move(p->bytes);
      in.offset = 0;
    }
    const size_t n = std::min(bytes - got, in.bytes.size() - in.offset);
    std::memcpy(data + got, in.bytes.data() + in.offset, n);
    in.offset += n;
    got += n;
  }
  return got;
}

std::string MemoryChannel::broken(int peer) {
  check_peer(peer);
  Inbound& in = in_[static_cast<size_t>(peer)];
  if (in.offset < in.bytes.size()) return "";
  if (!in.ended && faults_->next_is_end(peer, rank_)) {
    faults_->take(peer, rank_);
    in.ended = true;
  }
  if (!in.ended && faults_->has_packet(peer, rank_)) return "";
  if (std::string cut = faults_->cut_reason(rank_, peer); !cut.empty()) return cut;
  if (in.ended) return detail::concat("rank ", peer, " closed its end of the stream");
  return "";
}

void MemoryChannel::service() {
  seen_.store(faults_->epoch());
}

void MemoryChannel::sleep(Clock::time_point until, std::span<const int>) {
  if (woken_.exchange(false)) return;
  faults_->wait_change(rank_, seen_.load(), until);
  woken_.store(false);
}

void MemoryChannel::wake() {
  woken_.store(true);
  faults_->poke();
}

void MemoryChannel::close() {
  closed_ = true;
  for (int p = 0; p < faults_->size(); ++p)
    if (p != rank_) faults_->send_end(rank_, p);
}

}  // namespace lockstep::testing
