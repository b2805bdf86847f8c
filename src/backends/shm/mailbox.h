// Mailboxes: send and recv between two ranks of a shm group.
//
// Each ordered pair (sender, receiver) has a mailbox in the segment: kMailboxDepth buffers, each a
// ChunkHeader and mailbox_bytes of data, and two counters (sent, taken). A message is one or more
// chunks (at least one, so empty messages are matched too); the first chunk's header carries the
// send's identity and total size, and the receiver checks it against its recv before copying.
//
// [Eager sends] A send never waits for its receiver, like a socket with a large buffer: it writes
// the chunks that fit into free mailbox buffers, copies the rest into a staging queue, and
// returns. A sender thread (started on first use) moves staged chunks into the mailbox as the
// receiver takes them, sleeping on this rank's bell, which receivers ring. So a ring of
// send-then-recv on every rank cannot deadlock, whatever the message size. Staged data of one
// pair keeps its order; later sends to that receiver queue behind it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/shm/sync.h"

namespace lockstep::shm {

class Mailboxes {
 public:
  Mailboxes(const SegmentView& segment, const Sync& sync);
  // Stops the sender thread; staged data not yet delivered is dropped.
  ~Mailboxes();
  Mailboxes(const Mailboxes&) = delete;
  Mailboxes& operator=(const Mailboxes&) = delete;

  // Delivers op.input to op.peer, staging what does not fit. Never waits for the receiver.
  void send(const Op& op);
  // Receives the next message from op.peer into op.output; MismatchError when its tag or size
  // differs. Blocks until it arrived, within op.deadline.
  void recv(const Op& op);
  // Waits until every staged message is delivered (or failed), up to deadline.
  void drain(Deadline deadline);
  // Drops every staged message (the group aborted).
  void abandon();
  // Throws, once, the failure of a staged delivery (its receiver died, left, or its deadline
  // passed), naming the send.
  void rethrow_failure(const Op& op);

 private:
  struct Staged {
    MessageHeader header;         // payload_bytes: the whole message
    std::string name;             // "send #3 to rank 1", for errors
    std::vector<std::byte> rest;  // the message's bytes from rest_offset on
    uint64_t rest_offset = 0;
    uint64_t offset = 0;   // the next byte to deliver
    bool started = false;  // a chunk has been written (empty messages need one)
    Clock::time_point deadline;
  };
  struct Outbox {
    std::mutex mu;
    std::deque<Staged> queue;
  };

  // Writes chunks of the message (data = its bytes from `offset`) while mailbox buffers are free.
  // Returns whether the whole message is in. Never waits. REQUIRES the pair's outbox lock.
  bool push(int to, const MessageHeader& h, const std::byte* data, uint64_t& offset, bool& started);
  // Pushes what it can of every outbox. Returns whether anything moved.
  bool push_staged();
  void check_staged();  // fails staged messages whose receiver is gone or deadline passed
  void fail(const Staged& s, int to, ErrorClass error_class, const std::string& why);
  void sender_loop();
  void ring(int sender);

  SegmentView segment_;
  const Sync& sync_;
  int me_;
  std::vector<std::unique_ptr<Outbox>> outboxes_;
  std::mutex mu_;  // guards the fields below
  std::condition_variable changed_;
  size_t staged_ = 0;  // messages in all queues
  bool stop_ = false;
  std::string failure_;
  ErrorClass failure_class_ = ErrorClass::network;
  std::thread sender_;
};

}  // namespace lockstep::shm
