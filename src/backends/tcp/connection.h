// Connection: one established, non-blocking socket to one peer, with the queues of messages the
// current op sends to and receives from that peer (FIFO per direction).
//
// Sends go out as header + payload with one sendmsg(2) per batch; receives read the header first,
// check it, then read the payload straight into the caller's buffer. Nothing here blocks: the
// pump_* calls do what the socket allows and return. What goes wrong with the peer is thrown as
// PeerEvent, which TcpTransport turns into the user-facing error (it knows the op).
//
// Thread-safety: none; owned and driven by one TcpTransport on the progress thread.
#pragma once

#include <sys/types.h>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
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
};

class Connection {
 public:
  using Request = uint64_t;
  // Checks a received data header against what the front receive expects; throws MismatchError.
  using HeaderChecker = std::function<void(const MessageHeader& got, uint64_t expected_bytes)>;

  Connection(net::Fd fd, PeerInfo peer);

  const PeerInfo& peer() const { return peer_; }
  int fd() const { return fd_.get(); }
  // Whether the socket is still open (false after the peer closed it and we drained the stream).
  bool open() const { return fd_.valid(); }
  bool has_sends() const { return !sends_.empty(); }
  bool has_recvs() const { return !recvs_.empty(); }
  // Whether the incoming stream is between frames (no payload half read).
  bool at_frame_boundary() const { return !in_payload_; }
  // Whether bytes already read from the socket wait to be consumed (poll would not report them).
  bool has_buffered_input() const { return inbox_end_ > inbox_begin_; }
  size_t pending_recvs() const { return recvs_.size(); }
  size_t pending_sends() const { return sends_.size(); }

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
  // open. Afterwards the socket is closed and later receives consume the inbox.
  std::optional<PeerEvent> inspect_close();

  // Between frames with no receive posted: reads (never blocking) what has arrived of the next
  // frame's header into the inbox, and returns it once whole if it is a data frame. A later
  // receive consumes it as usual. A socket error throws PeerEvent (reset); a close is left to
  // inspect_close.
  std::optional<MessageHeader> peek_header();
  // Whether the inbox already holds the next frame's whole header (nothing more to peek).
  bool header_buffered() const { return !in_payload_ && inbox_size() >= sizeof(MessageHeader); }

  // Best-effort, non-blocking control frame (abort or bye); returns whether it was written whole.
  bool try_send_control(FrameType frame, ErrorClass error_class, const std::string& text);
  // Ends our side of the stream (FIN after what was written), keeping the socket to read.
  void shutdown_write();
  // Orderly goodbye: reads and discards frames until the peer's bye or close. Returns true once
  // it has seen either. Never throws.
  bool discard_until_goodbye();
  void close() { fd_.reset(); }

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

  size_t inbox_size() const { return inbox_end_ - inbox_begin_; }
  ssize_t fill_inbox(size_t max_bytes);
  bool ensure_inbox(size_t bytes, size_t read_up_to);
  ssize_t read_some(void* buf, size_t n);
  [[noreturn]] void throw_read_failure(ssize_t rc);
  bool take_header(size_t read_up_to);
  bool read_payload(RecvItem& item);
  void read_control_payload();
  PeerEvent scan_inbox();

  net::Fd fd_;
  PeerInfo peer_;
  std::deque<SendItem> sends_;
  std::deque<RecvItem> recvs_;
  // Receive state: between frames, or inside the payload of in_header_ (for recvs_.front()).
  MessageHeader in_header_{};
  bool in_payload_ = false;
  size_t payload_got_ = 0;
  // Bytes read from the socket but not yet consumed: headers read ahead with a payload, small
  // payloads, and everything a closed peer left behind (see inspect_close).
  std::vector<char> inbox_;
  size_t inbox_begin_ = 0, inbox_end_ = 0;
};

}  // namespace lockstep::tcp
