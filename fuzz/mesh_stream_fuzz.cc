// The incoming stream of a mesh connection (src/backends/tcp/connection.h): the collectives'
// frames and the p2p stream's frames interleaved on one socket, which whichever side reads sorts
// for both. A peer can send anything; this is the parser of it.
//
// Input: a script of what the peer sends (p2p frames, data frames, raw bytes, the stream's end)
// and how this rank reads it (p2p reads and collective receives of various sizes, in any order,
// peeks, a close inspection). The bytes go through a real socketpair in pieces.
// Checked: nothing crashes or loops; while the peer sends only well-formed frames, the p2p side
// gets exactly the p2p payloads in order and every collective receive exactly its frame's
// payload, whichever side read first; after garbage the p2p side gets nothing more (the
// collectives are told: PeerEvent garbage).
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "backends/tcp/connection.h"
#include "fuzz_input.h"

namespace {

using namespace lockstep;
using lockstep::tcp::Connection;
using lockstep::tcp::PeerEvent;

std::string frame(FrameType type, const std::string& payload, uint32_t tag = 0) {
  MessageHeader h = control_header(type, payload.size());
  h.tag = tag;
  std::string s(reinterpret_cast<const char*>(&h), sizeof h);
  return s + payload;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  net::Fd peer(sv[1]);
  Connection conn(net::Fd(sv[0]), {.rank = 1, .host = "fuzz"});
  conn.attach_p2p(-1, [] {});

  // The peer's side: what it sends, and what a faithful reader must get out of it.
  std::string wire, p2p_expected;
  std::deque<std::string> data_expected;
  bool garbage = false;
  const int frames = in.ConsumeIntegralInRange<int>(0, 24);
  for (int i = 0; i < frames; ++i) {
    const std::string payload = in.ConsumeRandomLengthString(3000);
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:
        // Raw bytes where a header belongs (a zero byte first: never the magic's first byte).
        wire += '\0' + in.ConsumeRandomLengthString(64);
        garbage = true;
        break;
      case 1:
        wire += frame(FrameType::p2p, "", kP2PStreamEnd);
        break;
      case 2:
      case 3:
      case 4:
        wire += frame(FrameType::data, payload);
        if (!garbage) data_expected.push_back(payload);
        break;
      default:
        wire += frame(FrameType::p2p, payload);
        if (!garbage) p2p_expected += payload;
    }
  }

  std::string p2p_got;
  size_t sent = 0;
  bool collectives_failed = false, peer_closed = false;
  std::vector<char> recv_buf;
  std::vector<Connection::Request> done;
  for (int step = 0; step < 400; ++step) {
    // The peer writes a piece, or closes once all is written.
    if (sent < wire.size()) {
      size_t piece = fuzz::read_size(in.ConsumeIntegral<uint8_t>());
      piece = piece == 0 ? wire.size() - sent : std::min(piece * 37, wire.size() - sent);
      ssize_t w = ::send(peer.get(), wire.data() + sent, piece, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<size_t>(w);
    } else if (!peer_closed) {
      ::shutdown(peer.get(), SHUT_WR);
      peer_closed = true;
    }
    try {
      switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0: {
          std::byte buf[4096];
          bool drained = false;
          const size_t want = in.ConsumeIntegralInRange<size_t>(1, sizeof buf);
          const size_t n = conn.p2p_read(buf, want, true, in.ConsumeBool(), drained);
          if (n > want) fuzz::broken("p2p_read returned more than asked");
          p2p_got.append(reinterpret_cast<const char*>(buf), n);
          break;
        }
        case 1:
          if (collectives_failed || data_expected.empty()) break;
          if (!conn.has_recvs()) {
            recv_buf.assign(data_expected.front().size(), '\0');
            conn.queue_recv(recv_buf.data(), recv_buf.size(), 7);
          }
          done.clear();
          conn.pump_recv(done, [](const MessageHeader&, uint64_t) {});
          if (!done.empty()) {
            if (std::string(recv_buf.data(), recv_buf.size()) != data_expected.front())
              fuzz::broken("a collective receive got other bytes than its frame's payload");
            data_expected.pop_front();
          }
          break;
        case 2:
          if (!collectives_failed && !conn.has_recvs()) (void)conn.peek_header();
          break;
        default:
          if (!collectives_failed && !conn.has_recvs() && peer_closed) (void)conn.inspect_close();
      }
    } catch (const PeerEvent&) {
      collectives_failed = true;  // garbage, a close mid-frame, a goodbye: the collectives stop
    }
    if (in.remaining_bytes() == 0 && sent == wire.size() && peer_closed && step > 64) break;
  }
  if (p2p_got.size() > p2p_expected.size())
    fuzz::broken("the p2p side got more bytes than the p2p frames before any garbage carried");
  if (p2p_expected.compare(0, p2p_got.size(), p2p_got) != 0)
    fuzz::broken("the p2p side got other bytes than the p2p frames' payloads, in order");
  return 0;
}
