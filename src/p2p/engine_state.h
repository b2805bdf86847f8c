// The p2p engine's state (engine.h), shared by its three files: engine.cc (posting, the progress
// loop, completion and closing), engine_inbound.cc (reading frames and matching) and
// engine_diagnosis.cc (deadlines, queries and the texts of errors). Everything here is guarded by
// State::mu, except what the [Threads] note of channel.h allows.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/failure.h"
#include "comm/work_access.h"
#include "p2p/engine.h"
#include "p2p/frames.h"

namespace lockstep::p2p {

struct Batch;

struct PendingOp {
  Request request;
  std::shared_ptr<Batch> batch;
  uint64_t bytes = 0;  // count * element size
  bool done = false;
  // Sends: the message id on the stream to the peer; recvs: the matched message's id.
  uint64_t id = 0;
  int source = -1;  // recvs: the rank matched (for any-source)
  enum class Stage {
    posted,
    awaiting_cts,
    streaming,
    awaiting_data,
    detached
  } stage = Stage::posted;
};
using OpPtr = std::shared_ptr<PendingOp>;

// One post(): completes as one Work.
struct Batch {
  detail::WorkCompletion work;
  Deadline deadline{Clock::time_point{}};
  Clock::time_point posted{};  // coarse_now() at post: for "timed out after N ms" only
  std::vector<OpPtr> ops;
  size_t remaining = 0;
  std::exception_ptr error;
  bool completed = false;  // its Work completed quietly (complete_finished)
  // After the deadline: the queries sent, and when to give up waiting for their replies.
  bool diagnosing = false;
  Clock::time_point give_up{};
  std::map<int, uint64_t> queries;  // peer -> query id
};

// A message that arrived before any recv wanted it.
struct Unexpected {
  int source = 0;
  FrameHeader header;            // eager or rts
  std::vector<std::byte> bytes;  // eager: the payload so far
  bool complete = false;         // eager: the whole payload is in; rts: always
  OpPtr claimed;                 // a recv matched it while its payload was still arriving
};
using UnexpectedPtr = std::shared_ptr<Unexpected>;

struct OutFrame {
  FrameHeader header;
  const std::byte* payload = nullptr;  // the send's buffer, or text.data()
  std::string text;                    // the payload of nack, cancel, reply and bye
  size_t written = 0;                  // of header and payload
  OpPtr completes;                     // eager and data: the send done once all is written
  Clock::time_point connect_by{};      // the first write to a peer may connect until then
};

struct Peer {
  std::deque<OutFrame> out;
  uint64_t next_id = 0;  // of this rank's next message to the peer
  // The frame being read from the peer.
  FrameHeader in;
  size_t in_header_got = 0;
  uint64_t in_left = 0;          // payload bytes still to read
  std::byte* in_dest = nullptr;  // where they go (null: read and dropped, or into in_text)
  bool in_is_text = false;
  std::string in_text;
  OpPtr in_recv;                            // the recv completed by this payload
  UnexpectedPtr in_unexpected;              // or the unexpected message it fills
  std::map<uint64_t, OpPtr> awaiting_cts;   // this rank's large sends, by id
  std::map<uint64_t, OpPtr> awaiting_data;  // this rank's recvs matched to the peer's rts, by id
  std::map<uint64_t, std::string> replies;  // answers to this rank's queries, by query id
  std::string gone;       // why the peer can no longer be reached ("" while it can)
  bool poisoned = false;  // a frame was cut short: nothing more may be written
};

struct Engine::State : detail::WaitPoller {
  State(std::unique_ptr<Channel> c, const GroupConfig& config, OpJournal* journal);

  std::unique_ptr<Channel> channel;
  OpJournal* const journal;  // may be null
  const bool lends_frames;   // channel->lends_bytes(): read_in parses frames in place
  const int rank;
  const int size;
  const std::string group;
  const std::string host;

  std::mutex mu;
  std::vector<Peer> peers;
  // Vectors, not lists: a message allocates nothing here (the few entries are scanned).
  std::vector<OpPtr> posted_recvs;              // unmatched, in post order
  std::list<UnexpectedPtr> unexpected;          // unmatched, in arrival order
  std::vector<std::shared_ptr<Batch>> batches;  // not yet completed
  struct TimedOut {
    int peer;
    std::string line;  // as answer_query writes it
    Clock::time_point at;
  };
  std::deque<TimedOut> recently_timed_out;  // ops that timed out lately, for answer_query
  uint64_t next_query = 0;
  bool closed = false;
  bool stop = false;
  // Works to complete once mu is released (their callbacks may post again).
  std::vector<std::shared_ptr<Batch>> finished;
  // Completed batches, freed by the next post() or engine round (release_retired): not between a
  // message's arrival and its waiter's return.
  std::vector<std::shared_ptr<Batch>> retired;
  std::thread thread;
  // Threads in Work::wait that drive progress themselves (poll_while): while there are any, the
  // engine thread naps instead of sleeping in the channel, so peers need not wake it.
  std::atomic<int> pollers{0};
  std::atomic<int64_t> last_poll_ns{0};  // steady clock, when the last waiter stopped polling
  std::condition_variable napping;  // the engine thread's wait while waiters poll (timeouts only)

  // engine.cc
  void loop();
  // [Waiters drive progress] A thread waiting for one of this engine's Works runs progress()
  // itself until done() or a short budget passes: on a fast path a message goes from the
  // channel to the waiter with no hand-off between threads.
  void poll_while(const std::function<bool()>& done) override;
  // REQUIRES mu; sets unread when a peer may have more to read. polling: from a waiter's poll
  // loop (looks for gone peers and passed deadlines at most once per millisecond).
  void progress(bool polling = false);
  bool unread = false;
  // Whether a waiter's poll loop must take the lock even when the channel has nothing unread:
  // frames wait to go out, or a peer had more to read. Written at the end of each progress().
  std::atomic<bool> busy{false};
  Clock::time_point next_look{};  // coarse_now() time of a polling progress()'s next look
  // The coarse_now() reading of the progress() round under way ({} outside one): the journal's
  // end time of the ops the round completes, so that a completion reads no clock of its own.
  Clock::time_point round_at{};
  void write_out(int peer);
  void queue(int peer, OutFrame frame);
  void queue_text(int peer, FrameKind kind, uint64_t id, const std::string& text);
  void op_done(const OpPtr& op, std::exception_ptr error = nullptr);
  // Tells the journal that r ended at coarse time `at` (when there is one and r has an entry in
  // it).
  void journal_end(const Request& r, bool ok, Clock::time_point at) {
    if (journal && r.record_id != kNoRecord) journal->on_p2p_ended(r.record_id, ok, at);
  }
  void complete_finished(std::unique_lock<std::mutex>& lock);
  void release_retired();
  void start_send(const OpPtr& op);
  bool send_now(const Request& r, Deadline deadline);  // true: written whole, the send is done
  void start_recv(const OpPtr& op);
  std::vector<int> peers_with_output() const;

  // engine_inbound.cc
  // Reads what the peer sent, up to a bounded number of reads; true when it stopped at that bound
  // (read to 0 before sleeping: a channel need not wake for bytes already there).
  bool read_in(int peer);
  // [Frames in place] (channels that lend their bytes): the next frame from `peer` taken whole,
  // or nothing there, or only part of a frame (read() then takes it in pieces).
  enum class Taken { frame, nothing, partly };
  Taken take_whole_frame(int peer);
  void on_header(int peer);
  void on_payload_done(int peer);
  void on_message(int peer, const FrameHeader& h);           // eager or rts header
  void deliver(OpPtr recv, int peer, const FrameHeader& h);  // matched message
  void check_gone(int peer);
  // For a recv from `peer`: a note when the peer's unmatched messages here carry another tag.
  std::string tag_hint(const PendingOp& op, int peer) const;
  void fail_ops_with(int peer, ErrorClass error_class, const std::string& why);

  // engine_diagnosis.cc
  void check_deadlines();
  void detach(const OpPtr& op);
  std::string answer_query(int asker) const;
  std::string timeout_text(const Batch& b) const;
  std::string op_text(const PendingOp& op) const;
  Clock::time_point next_wakeup() const;
  std::string mismatch_text(const PendingOp& recv, int sender, const FrameHeader& h) const;
};

// Whether a send is small enough for State::send_now (header and payload in one write).
bool send_now_fits(const Request& r);

// "rank 3".
std::string rank_text(int rank);

}  // namespace lockstep::p2p
