#include "backends/mpi/p2p_channel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "backends/mpi/communicator.h"
#include "backends/mpi/runtime.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

constexpr size_t kChunkBytes = 256 * 1024;
constexpr size_t kSendSlots = 4;  // per peer
constexpr size_t kRecvSlots = 2;  // per peer, posted ahead
constexpr std::chrono::microseconds kPollInterval{50};
// [Idle polls] While the engine has nothing pending: how long it still polls every
// kPollInterval, and the longest pause between tests after that.
constexpr std::chrono::milliseconds kIdleGrace{5};
constexpr std::chrono::microseconds kIdlePollMax{20'000};
constexpr std::chrono::seconds kCloseGrace{5};

struct Slot {
  std::vector<std::byte> bytes;
  MPI_Request request = MPI_REQUEST_NULL;
  size_t length = 0;    // recv: bytes received; send: bytes sent
  size_t consumed = 0;  // recv: bytes already read
  bool done = false;    // the request completed
};

struct PeerStreams {
  std::deque<Slot> sends;  // in flight, oldest first
  std::deque<Slot> recvs;  // posted, in post order
  std::string broken;
  bool ended = false;  // the peer's end-of-stream marker (a zero-length message) arrived
};

GroupConfig own_communicator(GroupConfig config) {
  config.name += "/p2p";  // its own store keys and creation tag
  return config;
}

class MpiChannel final : public p2p::Channel {
 public:
  explicit MpiChannel(const GroupConfig& config)
      : comm_(own_communicator(config)), rank_(config.rank), peers_(config.size) {
    std::shared_lock<std::shared_mutex> mpi(mpi::communicator_changes());
    std::lock_guard<std::mutex> lock(mu_);
    for (int p = 0; p < config.size; ++p)
      if (p != rank_)
        for (size_t i = 0; i < kRecvSlots; ++i) post_recv(p, Slot{});
  }

  ~MpiChannel() override { close(); }

  const char* kind() const override { return "mpi"; }

  size_t write(int peer, const std::byte* data, size_t bytes, Deadline) override {
    std::shared_lock<std::shared_mutex> mpi(mpi::communicator_changes());
    std::lock_guard<std::mutex> lock(mu_);
    PeerStreams& s = peers_[peer];
    reap_sends(peer);
    if (bytes == 0 || s.sends.size() >= kSendSlots || !s.broken.empty()) return 0;
    const size_t n = std::min(bytes, kChunkBytes);
    Slot& slot = s.sends.emplace_back();
    slot.bytes.assign(data, data + n);
    slot.length = n;
    int code = MPI_Isend(slot.bytes.data(), static_cast<int>(n), MPI_BYTE, peer, 0, comm_.get(),
                         &slot.request);
    if (code != MPI_SUCCESS) {
      s.sends.pop_back();
      s.broken = "MPI_Isend to rank " + std::to_string(peer) + " failed: " + mpi::error_text(code);
      return 0;
    }
    return n;
  }

  size_t read(int peer, std::byte* data, size_t bytes) override {
    std::shared_lock<std::shared_mutex> mpi(mpi::communicator_changes());
    std::lock_guard<std::mutex> lock(mu_);
    PeerStreams& s = peers_[peer];
    size_t got = 0;
    while (got < bytes && !s.recvs.empty() && !s.ended) {
      Slot& front = s.recvs.front();
      if (!test(peer, front)) break;
      if (front.length == 0) {  // end of stream: nothing follows
        s.ended = true;
        s.recvs.pop_front();
        break;
      }
      const size_t n = std::min(bytes - got, front.length - front.consumed);
      std::memcpy(data + got, front.bytes.data() + front.consumed, n);
      front.consumed += n;
      got += n;
      if (front.consumed == front.length) {
        Slot reused = std::move(front);  // its buffer takes the next chunk
        s.recvs.pop_front();
        post_recv(peer, std::move(reused));
      }
    }
    return got;
  }

  std::string broken(int peer) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (peers_[peer].ended && peers_[peer].broken.empty())
      return "rank " + std::to_string(peer) + " closed its end of the stream";
    return peers_[peer].broken;
  }

  void sleep(Clock::time_point until, std::span<const int> want_room) override {
    was_busy_.store(true);
    for (;;) {
      if (woken_.exchange(false)) return;
      if (ready(want_room, nullptr)) return;
      if (Clock::now() >= until) return;
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  // [Idle polls] Nothing posted: MPI still has to be called for the peers' messages to arrive
  // (it has no descriptor to wait on). For the first kIdleGrace this polls as sleep() does, so
  // back-to-back ops with short gaps between them see no change. Then it waits on idle_cv_, for
  // a pause that doubles up to kIdlePollMax: some fifty wake-ups a second instead of about ten
  // thousand. Bytes that arrive or a wake() (a post) end it and start the grace again, and so do
  // this rank's own sends still in MPI (a large chunk moves only inside MPI calls).
  void sleep_idle(Clock::time_point until) override {
    if (was_busy_.exchange(false)) idle_since_.reset();
    for (;;) {
      const auto now = Clock::now();
      if (!idle_since_) {
        idle_since_ = now;
        idle_pause_ = kPollInterval;
      }
      const bool grace = now - *idle_since_ < kIdleGrace;
      bool sending = false;
      if (woken_.exchange(false) || ready({}, grace ? nullptr : &sending)) {
        idle_since_.reset();
        return;
      }
      if (now >= until) return;
      if (sending) idle_since_ = now;  // a new grace
      if (grace || sending) {
        std::this_thread::sleep_for(kPollInterval);
        continue;
      }
      idle_pause_ = std::min(idle_pause_ * 2, kIdlePollMax);
      std::unique_lock<std::mutex> lock(idle_mu_);
      idle_sleeping_.store(true);
      idle_cv_.wait_for(lock, std::min<Clock::duration>(idle_pause_, until - now),
                        [&] { return woken_.load(); });
      idle_sleeping_.store(false);
    }
  }

  // A sleep_idle() past its grace waits on idle_cv_: notified only then (a post pays no system
  // call while the engine thread polls). Both atomics are sequentially consistent: either this sees
  // idle_sleeping_, or the sleeper's wait sees woken_.
  void wake() override {
    woken_.store(true);
    if (idle_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(idle_mu_);
      idle_cv_.notify_one();
    }
  }

  // [Orderly close] Every peer gets an end-of-stream marker (a zero-length message), and this rank
  // receives (and drops) what its peers still send until their markers arrive, a few seconds at
  // most: a message left unreceived on a freed communicator could be matched by a later one
  // that reuses its context id.
  void close() override {
    std::shared_lock<std::shared_mutex> mpi(mpi::communicator_changes());
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
    const int n = static_cast<int>(peers_.size());
    for (int p = 0; p < n; ++p) {
      if (p == rank_) continue;
      Slot& marker = peers_[p].sends.emplace_back();
      MPI_Isend(nullptr, 0, MPI_BYTE, p, 0, comm_.get(), &marker.request);
    }
    const auto deadline = Clock::now() + kCloseGrace;
    for (;;) {
      bool waiting = false;
      for (int p = 0; p < n; ++p) {
        PeerStreams& s = peers_[p];
        if (p == rank_ || s.ended || !s.broken.empty()) continue;
        while (!s.recvs.empty() && test(p, s.recvs.front())) {
          Slot done = std::move(s.recvs.front());
          s.recvs.pop_front();
          if (done.length == 0) {
            s.ended = true;
            break;
          }
          post_recv(p, std::move(done), true);  // dropped: keep receiving until the marker
        }
        waiting |= !s.ended && s.broken.empty();
        reap_sends(p);
        waiting |= !s.sends.empty();
      }
      if (!waiting || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(kPollInterval);
    }
    for (int p = 0; p < n; ++p) {
      for (auto* slots : {&peers_[p].recvs, &peers_[p].sends})
        for (Slot& slot : *slots) {
          if (slot.request == MPI_REQUEST_NULL) continue;
          MPI_Cancel(&slot.request);  // a peer that never closed: given up
          MPI_Wait(&slot.request, MPI_STATUS_IGNORE);
        }
      peers_[p].recvs.clear();
      peers_[p].sends.clear();
    }
  }

 private:
  // REQUIRES mu_.
  void post_recv(int peer, Slot slot_in, bool closing = false) {
    if (closing_ && !closing) return;
    Slot& slot = peers_[peer].recvs.emplace_back(std::move(slot_in));
    slot.bytes.resize(kChunkBytes);
    slot.request = MPI_REQUEST_NULL;
    slot.length = slot.consumed = 0;
    slot.done = false;
    int code = MPI_Irecv(slot.bytes.data(), static_cast<int>(kChunkBytes), MPI_BYTE, peer, 0,
                         comm_.get(), &slot.request);
    if (code != MPI_SUCCESS) {
      peers_[peer].recvs.pop_back();
      peers_[peer].broken =
          "MPI_Irecv from rank " + std::to_string(peer) + " failed: " + mpi::error_text(code);
    }
  }

  // Whether the posted recv in `slot` has completed (recording its length). REQUIRES mu_.
  bool test(int peer, Slot& slot) {
    if (slot.done) return true;
    int flag = 0;
    MPI_Status status;
    int code = MPI_Test(&slot.request, &flag, &status);
    if (code != MPI_SUCCESS) {
      peers_[peer].broken = "receiving from rank " + std::to_string(peer) +
                            " failed in MPI: " + mpi::error_text(code);
      return false;
    }
    if (!flag) return false;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    slot.length = static_cast<size_t>(count);
    slot.done = true;
    return true;
  }

  // Whether sleep() should end: a recv completed, a stream broke, or a peer in want_room has a
  // free send slot. *sending (when given): whether any send is still in MPI.
  bool ready(std::span<const int> want_room, bool* sending) {
    std::shared_lock<std::shared_mutex> mpi(mpi::communicator_changes());
    std::lock_guard<std::mutex> lock(mu_);
    for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
      if (p == rank_) continue;
      auto& recvs = peers_[p].recvs;
      if (!recvs.empty() && test(p, recvs.front())) return true;
      if (!peers_[p].broken.empty()) return true;
      if (sending) {
        reap_sends(p);
        *sending |= !peers_[p].sends.empty();
      }
    }
    for (int p : want_room) {
      reap_sends(p);
      if (peers_[p].sends.size() < kSendSlots) return true;
    }
    return false;
  }

  // Frees the send slots whose MPI_Isend completed, oldest first. REQUIRES mu_.
  void reap_sends(int peer) {
    auto& sends = peers_[peer].sends;
    while (!sends.empty()) {
      int flag = 0;
      int code = MPI_Test(&sends.front().request, &flag, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) {
        peers_[peer].broken =
            "sending to rank " + std::to_string(peer) + " failed in MPI: " + mpi::error_text(code);
        sends.pop_front();
        continue;
      }
      if (!flag) return;
      sends.pop_front();
    }
  }

  mpi::Communicator comm_;
  const int rank_;
  std::mutex mu_;
  std::vector<PeerStreams> peers_;
  std::atomic<bool> woken_{false};
  bool closing_ = false;
  // [Idle polls] sleep_idle() (the engine thread's only) waits here between its tests, and
  // keeps its own state.
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::atomic<bool> idle_sleeping_{false};
  std::optional<Clock::time_point> idle_since_;  // since when nothing came or was posted
  std::atomic<bool> was_busy_{false};  // a sleep() (ops pending) since the last sleep_idle()
  std::chrono::microseconds idle_pause_{kPollInterval};
};

}  // namespace

std::unique_ptr<p2p::Channel> make_mpi_p2p_channel(const GroupConfig& config, const Backend&) {
  return std::make_unique<MpiChannel>(config);
}

}  // namespace lockstep
