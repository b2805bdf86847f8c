// Connection: one established, non-blocking socket to one peer, shared by the group's collectives
// and its point-to-point stream (one connection per peer pair; docs/architecture.md).
//
// [Collectives] The queues of messages the current op sends to and receives from that peer (FIFO
// per direction). Sends go out as header + payload with one sendmsg(2) per batch; receives read
// the header first, check it, then read the payload straight into the caller's buffer. Nothing
// here blocks: the pump_* calls do what the socket allows and return. What goes wrong with the
// peer is thrown as PeerEvent, which TcpTransport turns into the user-facing error (it knows the
// op).
//
// [The p2p stream] The group's p2p channel (MeshChannel) writes its bytes as p2p frames
// (message_header.h) between the collectives' frames, never inside one, and reads them back out
// of the incoming stream: whichever side reads the socket sorts what arrives (demux): p2p
// payloads go to the p2p inbox, everything else stays in the collective inbox, in order. So
// neither side ever reads the other's bytes, and neither waits for the other to read:
// - the collective side routes p2p frames it meets and wakes the channel (p2p_wake);
// - the p2p side reads past collective frames, keeping them for the collective side, up to
//   kCollectiveBacklog bytes (a socket buffer's worth, as two connections would hold in the
//   kernel); beyond that it waits until the collectives read (p2p_blocked), and it wakes the
//   transport (its eventfd) when it kept collective bytes the transport's poll cannot see.
// A p2p frame that the socket takes only in part is finished from a copy (the tail) before any
// other frame; a collective frame in part blocks p2p writes until it is out.
//
// [Threads] The collective side is one thread at a time (TcpTransport's), the p2p side another
// (the p2p engine's, under its lock); every member below that both touch is guarded by mu_, which
// the public calls take. The socket stays open (its number reserved) until destruction: close()
// and a peer's close only mark it, so that a poll on the other thread never sees its number
// reused.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/message_header.h"
#include "net/socket.h"

namespace lockstep::tcp {

// Who is on the other end (learned during the mesh handshake).
struct PeerInfo {
  int rank = -1;
  std::string host;     // the peer's host name
  std::string address;  // "ip:port" it listens on
  int pid = 0;
};

// Something the peer did that ends the connection. Thrown by the pump_* calls.
struct PeerEvent {
  enum Kind { closed, reset, aborted, goodbye, garbage } kind = closed;
  int peer = -1;
  int error = 0;                               // errno for reset
  ErrorClass error_class = ErrorClass::other;  // aborted: the class of the peer's error
  std::string text;                            // aborted: the peer's reason; garbage: what was seen
  bool mid_message = false;                    // closed: the stream ended inside a message
  std::optional<uint64_t> failed_seq;          // aborted: the op the peer failed in, if any
};

// How the p2p stream from the peer stands, for MeshChannel::broken.
struct P2PStreamState {
  bool unread = false;     // p2p bytes wait in the inbox
  bool ended = false;      // the peer ended it in an orderly way (kP2PStreamEnd)
  bool closed = false;     // the socket ended (EOF) or this rank closed it
  int error = 0;           // errno of a failed read or write, 0 if none
  bool aborted = false;    // the peer's collectives sent an abort frame
  bool garbage = false;    // the stream held something that is not a frame
  bool shut_here = false;  // this rank ended its side (an abort of its collectives)
};

class Connection {
 public:
  using Request = uint64_t;
  // Checks a received data header against what the front receive expects; throws MismatchError.
  using HeaderChecker = std::function<void(const MessageHeader& got, uint64_t expected_bytes)>;

  Connection(net::Fd fd, PeerInfo peer);

  const PeerInfo& peer() const { return peer_; }
  int fd() const { return fd_.get(); }
  // Whether the stream is still open (false after the peer closed it and we drained the stream,
  // or after close()).
  bool open() const;
  // The collective side's state: only its own thread changes it.
  bool has_sends() const { return !sends_.empty(); }
  bool has_recvs() const { return !recvs_.empty(); }
  // Whether the incoming stream is between frames (no payload half read).
  bool at_frame_boundary() const { return !in_payload_; }
  size_t pending_recvs() const { return recvs_.size(); }
  size_t pending_sends() const { return sends_.size(); }
  // Whether collective bytes already read from the socket wait to be consumed (poll would not
  // report them).
  bool has_buffered_input() const;

  void queue_send(const MessageHeader& header, const void* payload, Request id);
  void queue_recv(void* data, size_t bytes, Request id);
  // Writes what the socket takes; appends the ids of completed sends to done.
  void pump_send(std::vector<Request>& done);
  // Reads what has arrived; appends the ids of completed receives to done.
  void pump_recv(std::vector<Request>& done, const HeaderChecker& check);
  // Drops every queued message of the failed op. Returns whether the outgoing stream is at a
  // frame boundary (so that a control frame may follow).
  bool clear_queues();

  // The peer half-closed or errored (POLLRDHUP/POLLHUP/POLLERR) while nothing of ours reads from
  // it: reads what is left into the inbox and returns what the stream says (an abort, a goodbye
  // after complete frames, or a close without goodbye); nothing when the socket is in fact still
  // open. Afterwards the stream counts as closed and later receives consume the inbox.
  std::optional<PeerEvent> inspect_close();

  // Between frames with no receive posted: reads (never blocking) what has arrived of the next
  // frame's header into the inbox, and returns it once whole if it is a data frame. A later
  // receive consumes it as usual. A socket error throws PeerEvent (reset); a close is left to
  // inspect_close.
  std::optional<MessageHeader> peek_header();
  // Whether the inbox already holds the next frame's whole header (nothing more to peek).
  bool header_buffered() const;

  // Best-effort, non-blocking control frame (abort or bye); returns whether it was written whole.
  // An abort names failed_seq, the op this rank failed in, when there is one.
  bool try_send_control(FrameType frame, ErrorClass error_class, const std::string& text,
                        std::optional<uint64_t> failed_seq = std::nullopt);
  // Ends our side of the stream (FIN after what was written), keeping the socket to read.
  void shutdown_write();
  // Orderly goodbye: reads and discards frames until the peer's bye or close. Returns true once
  // it has seen either. Never throws.
  bool discard_until_goodbye();
  // Ends the stream for both sides (the socket itself closes at destruction).
  void close();

  // ---- the p2p side (MeshChannel) ----
  // Starts keeping the peer's p2p bytes; `wake` is called (under the lock, from either thread)
  // when some arrive or p2p writes may go on. detach_p2p stops it: p2p bytes are dropped then.
  void attach_p2p(int transport_wake_fd, std::function<void()> wake);
  void detach_p2p();
  // Takes up to `bytes` of `data` into the outgoing stream as one p2p frame; returns how many (0:
  // no room now, or a collective frame is half written). Throws PeerEvent (reset) when the
  // socket fails.
  size_t p2p_write(const std::byte* data, size_t bytes);
  // Writes the orderly end of the p2p stream; false while it cannot go yet.
  bool p2p_write_end();
  // Writes what is left of a p2p frame the socket took in part; returns whether none is left.
  bool flush_tail();
  bool tail_pending() const;
  // Whether p2p writes wait for a collective frame to finish (then the wake says when).
  bool p2p_write_blocked() const;
  // Takes up to `bytes` of the peer's p2p stream: what the inbox holds, then, with from_socket,
  // what the socket has; 0: nothing now. Without past_collectives it leaves a collective frame
  // at the socket's head where it is (p2p_collective_at_head), reading neither it nor what
  // follows; with it, it reads past (keeping it). `drained` is set when the socket had no more
  // for now (or must be left to the collectives: p2p_read_blocked).
  size_t p2p_read(std::byte* data, size_t bytes, bool from_socket, bool past_collectives,
                  bool& drained);
  // Whether the last p2p_read without past_collectives stopped at a collective frame that the
  // collectives have not read since.
  bool p2p_collective_at_head() const;
  // Whether a p2p read must wait for the collectives to read first (their backlog is full).
  bool p2p_read_blocked() const;
  P2PStreamState p2p_state() const;

 private:
  struct SendItem {
    MessageHeader header;
    const char* payload;
    size_t sent;  // of header + payload
    Request id;
  };
  struct RecvItem {
    char* data;
    size_t bytes;
    Request id;
  };

  // All below: REQUIRES mu_.
  bool flush_tail_locked();
  void wake_p2p() const {
    if (p2p_wake_) p2p_wake_();
  }
  bool live() const { return !closed_; }
  // Collective bytes in the inbox (sorted: p2p frames taken out).
  size_t inbox_size() const { return scan_ - inbox_begin_; }
  ssize_t fill_inbox(size_t max_bytes);
  void demux();
  // Removes [at, at + bytes) of the inbox, handing it to the p2p inbox when `keep`.
  void take_p2p(size_t at, size_t bytes, bool keep);
  void wake_transport();
  void after_consume();
  // Whether the socket's next frame, whole in sight (peeked), is the collectives'.
  bool collective_next();
  bool ensure_inbox(size_t bytes, size_t read_up_to);
  ssize_t read_some(void* buf, size_t n);
  [[noreturn]] void throw_read_failure(ssize_t rc);
  bool take_header(size_t read_up_to);
  bool read_payload(RecvItem& item);
  void read_control_payload();
  PeerEvent scan_inbox();
  // What the peer's end of the stream says (after it closed): scan_inbox, with the socket's error
  // (`error`, or the one a read kept) for a close between frames.
  PeerEvent end_event(int error);
  bool collective_mid_frame() const { return !sends_.empty() && sends_.front().sent != 0; }
  ssize_t send_msg(const iovec* iov, size_t n);
  void note_p2p_write_wait();

  net::Fd fd_;
  PeerInfo peer_;
  mutable std::mutex mu_;
  bool closed_ = false;
  std::deque<SendItem> sends_;
  std::deque<RecvItem> recvs_;
  // Receive state: between frames, or inside the payload of in_header_ (for recvs_.front()).
  MessageHeader in_header_{};
  bool in_payload_ = false;
  size_t payload_got_ = 0;
  // Bytes read from the socket but not yet consumed: [inbox_begin_, scan_) collective bytes in
  // order (headers read ahead with a payload, small payloads, what a closed peer left behind);
  // [scan_, inbox_end_) the start of a frame header not yet whole.
  std::vector<char> inbox_;
  size_t inbox_begin_ = 0, scan_ = 0, inbox_end_ = 0;
  // The frame the demux is inside: bytes of it still to come from the socket.
  uint64_t coll_left_ = 0, p2p_left_ = 0;
  bool garbage_ = false;  // the demux met bytes that are no frame: all the rest is the collectives'
  // The p2p side.
  bool p2p_attached_ = false;
  int transport_wake_fd_ = -1;
  std::function<void()> p2p_wake_;
  std::vector<std::byte> p2p_in_;
  size_t p2p_in_begin_ = 0;
  std::vector<char> tail_;  // what the socket has yet to take of the last p2p frame
  size_t tail_begin_ = 0;
  bool p2p_wants_out_ = false;  // a p2p write waited for a collective frame
  bool p2p_blocked_ = false;    // a p2p read waited for the collectives to read their backlog
  bool coll_at_head_ = false;   // a p2p read left a collective frame at the socket's head
  bool p2p_reading_ = false;    // the p2p side reads now: it needs no wake for what it sorts
  bool p2p_ended_ = false;
  bool eof_ = false;
  bool peer_aborted_ = false;
  bool shut_here_ = false;
  int error_ = 0;  // errno of the first failed read or write
  // errno of a failed read: a socket reports its error to one read only, which may be either
  // side's, and the other side's next read then sees a plain end of stream.
  int read_error_ = 0;
};

}  // namespace lockstep::tcp
