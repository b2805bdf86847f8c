// The p2p engine's inbound side: reading frames from each peer's stream, matching messages with
// recvs, and what a peer's leaving does to the ops that need it (see engine.h).
#include <algorithm>
#include <cstring>

#include "lockstep/core/error.h"
#include "p2p/engine_state.h"

namespace lockstep::p2p {

namespace {

constexpr size_t kReadsPerRound = 64;  // per peer, so that one busy peer cannot starve the rest
constexpr size_t kScratchBytes = 64 * 1024;

bool matches(const Request& r, int source, uint32_t tag) {
  return (r.peer == kAnySource || r.peer == source) && r.tag == tag;
}

std::exception_ptr error_of(ErrorClass error_class, const std::string& text) {
  try {
    throw_as(error_class, text);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

void Engine::State::start_recv(const OpPtr& op) {
  const Request& r = op->request;
  auto it = std::find_if(unexpected.begin(), unexpected.end(), [&](const UnexpectedPtr& u) {
    return matches(r, u->source, u->header.tag);
  });
  if (it == unexpected.end()) {
    if (r.peer != kAnySource && !peers[r.peer].gone.empty()) {
      op_done(op, error_of(ErrorClass::network,
                           name_of(r) + ": " + peers[r.peer].gone + tag_hint(*op, r.peer)));
      return;
    }
    posted_recvs.push_back(op);
    return;
  }
  UnexpectedPtr u = *it;
  unexpected.erase(it);
  op->source = u->source;
  if (op->bytes != u->header.bytes || static_cast<uint8_t>(r.dtype) != u->header.dtype) {
    const std::string text = mismatch_text(*op, u->source, u->header);
    if (u->header.kind == FrameKind::rts)
      queue_text(u->source, FrameKind::nack, u->header.id, text);
    op_done(op, error_of(ErrorClass::mismatch, text));
    return;
  }
  if (u->header.kind == FrameKind::rts) {
    deliver(op, u->source, u->header);
  } else if (u->complete) {
    if (!u->bytes.empty()) std::memcpy(r.output, u->bytes.data(), u->bytes.size());
    op_done(op);
  } else {
    u->claimed = op;  // the rest of its payload is still arriving
    op->stage = PendingOp::Stage::awaiting_data;
  }
}

// A message whose header just arrived from `peer` (eager or rts).
void Engine::State::on_message(int peer, const FrameHeader& h) {
  auto it = std::find_if(posted_recvs.begin(), posted_recvs.end(),
                         [&](const OpPtr& op) { return matches(op->request, peer, h.tag); });
  if (it == posted_recvs.end()) {
    auto u = std::make_shared<Unexpected>();
    u->source = peer;
    u->header = h;
    if (h.kind == FrameKind::eager) {
      u->bytes.resize(h.bytes);
      peers[peer].in_dest = u->bytes.data();
      peers[peer].in_unexpected = u;
    }
    u->complete = h.kind == FrameKind::rts || h.bytes == 0;
    unexpected.push_back(u);
    return;
  }
  OpPtr recv = std::move(*it);
  posted_recvs.erase(it);
  deliver(std::move(recv), peer, h);
}

// A recv matched with a message from `peer` whose header is h (its payload, for an eager one, is
// the next thing on the stream when this is called from on_message).
void Engine::State::deliver(OpPtr recv, int peer, const FrameHeader& h) {
  recv->source = peer;
  if (recv->bytes != h.bytes || static_cast<uint8_t>(recv->request.dtype) != h.dtype) {
    const std::string text = mismatch_text(*recv, peer, h);
    if (h.kind == FrameKind::rts) queue_text(peer, FrameKind::nack, h.id, text);
    op_done(recv, error_of(ErrorClass::mismatch, text));
    return;  // an eager payload is read and dropped
  }
  if (h.kind == FrameKind::eager) {
    peers[peer].in_dest = static_cast<std::byte*>(recv->request.output);
    peers[peer].in_recv = std::move(recv);
    return;
  }
  recv->id = h.id;
  recv->stage = PendingOp::Stage::awaiting_data;
  peers[peer].awaiting_data[h.id] = recv;
  OutFrame cts;
  cts.header.kind = FrameKind::cts;
  cts.header.id = h.id;
  cts.connect_by = recv->batch->deadline.at();
  queue(peer, std::move(cts));
}

bool Engine::State::read_in(int peer) {
  Peer& p = peers[peer];
  for (size_t round = 0; round < kReadsPerRound; ++round) {
    if (p.in_header_got == 0 && lends_frames) {
      const Taken taken = take_whole_frame(peer);
      if (taken == Taken::nothing) return false;
      // A waiter's op is done: return to complete it rather than first look at where the next
      // frame will be, a line the peer has likely yet to write (a cache miss on the way to the
      // waiter). The channel's sleep() looks there before it sleeps.
      if (taken == Taken::frame) {
        if (!finished.empty()) return false;
        continue;
      }
    }
    if (p.in_header_got < sizeof(FrameHeader)) {
      size_t n = channel->read(peer, reinterpret_cast<std::byte*>(&p.in) + p.in_header_got,
                               sizeof(FrameHeader) - p.in_header_got);
      if (n == 0) return false;
      p.in_header_got += n;
      if (p.in_header_got < sizeof(FrameHeader)) continue;
      check_frame(p.in, peer);
      on_header(peer);
      continue;
    }
    if (p.in_left > 0) {
      size_t n;
      if (p.in_is_text || !p.in_dest) {
        std::byte scratch[kScratchBytes];
        n = channel->read(peer, scratch, std::min<uint64_t>(p.in_left, sizeof scratch));
        if (p.in_is_text) p.in_text.append(reinterpret_cast<const char*>(scratch), n);
      } else {
        n = channel->read(peer, p.in_dest, p.in_left);
        p.in_dest += n;
      }
      if (n == 0) return false;
      p.in_left -= n;
    }
    if (p.in_left == 0) on_payload_done(peer);
  }
  return true;  // more may be waiting: the channel's sleep() would not wake for it
}

// [Frames in place] When the channel lends the next frame whole (Channel::peek), its header is
// parsed there and its payload copied straight to where it goes, and the frame is taken with one
// consume(): one publication to the peer per frame instead of one per read.
Engine::State::Taken Engine::State::take_whole_frame(int peer) {
  const std::span<const std::byte> span = channel->peek(peer);
  if (span.empty()) return Taken::nothing;
  if (span.size() < sizeof(FrameHeader)) return Taken::partly;
  Peer& p = peers[peer];
  FrameHeader h;
  std::memcpy(&h, span.data(), sizeof h);
  check_frame(h, peer);
  const uint64_t payload = carries_payload(h.kind) ? h.bytes : 0;
  if (span.size() - sizeof h < payload) return Taken::partly;  // read() takes it in pieces
  p.in = h;
  p.in_header_got = sizeof h;
  on_header(peer);  // without a payload, the frame is done here
  if (payload > 0) {
    const std::byte* bytes = span.data() + sizeof h;
    if (p.in_is_text)
      p.in_text.append(reinterpret_cast<const char*>(bytes), payload);
    else if (p.in_dest)
      std::memcpy(p.in_dest, bytes, payload);
    p.in_left = 0;
    on_payload_done(peer);
  }
  channel->consume(peer, sizeof h + payload);
  return Taken::frame;
}

// The header of p.in is complete: decide where its payload goes, or act on it.
void Engine::State::on_header(int peer) {
  Peer& p = peers[peer];
  const FrameHeader& h = p.in;
  p.in_dest = nullptr;
  p.in_is_text = false;
  p.in_text.clear();
  p.in_recv.reset();
  p.in_unexpected.reset();
  p.in_left = carries_payload(h.kind) ? h.bytes : 0;
  switch (h.kind) {
    case FrameKind::eager:
    case FrameKind::rts:
      on_message(peer, h);
      break;
    case FrameKind::cts: {
      auto it = p.awaiting_cts.find(h.id);
      if (it == p.awaiting_cts.end()) {
        queue_text(peer, FrameKind::cancel, h.id,
                   "the send ended before the recv was ready (its deadline passed)");
        break;
      }
      OpPtr send = it->second;
      p.awaiting_cts.erase(it);
      send->stage = PendingOp::Stage::streaming;
      OutFrame data;
      data.header.kind = FrameKind::data;
      data.header.id = h.id;
      data.header.bytes = send->bytes;
      data.payload = static_cast<const std::byte*>(send->request.input);
      data.completes = send;
      data.connect_by = send->batch->deadline.at();
      queue(peer, std::move(data));
      break;
    }
    case FrameKind::data: {
      auto it = p.awaiting_data.find(h.id);
      if (it == p.awaiting_data.end()) break;  // the recv ended: the bytes are dropped
      OpPtr recv = it->second;
      p.awaiting_data.erase(it);
      LOCKSTEP_ENFORCE(h.bytes == recv->bytes, NetworkError, rank_text(peer), " sent ", h.bytes,
                       " bytes for message ", h.id, ", which announced ", recv->bytes,
                       ": the stream is corrupt. Restart the job");
      p.in_dest = static_cast<std::byte*>(recv->request.output);
      p.in_recv = recv;
      break;
    }
    case FrameKind::query:
      queue_text(peer, FrameKind::reply, h.id, answer_query(peer));
      break;
    case FrameKind::nack:
    case FrameKind::cancel:
    case FrameKind::reply:
    case FrameKind::bye:
      p.in_is_text = true;
      break;
  }
  if (!carries_payload(h.kind) || h.bytes == 0) on_payload_done(peer);
}

// The frame p.in and its payload are all in.
void Engine::State::on_payload_done(int peer) {
  Peer& p = peers[peer];
  const FrameHeader h = p.in;
  p.in_header_got = 0;
  p.in_left = 0;
  p.in_dest = nullptr;
  if (p.in_recv) op_done(std::exchange(p.in_recv, nullptr));
  if (UnexpectedPtr u = std::exchange(p.in_unexpected, nullptr)) {
    u->complete = true;
    if (u->claimed) {
      if (!u->bytes.empty())
        std::memcpy(u->claimed->request.output, u->bytes.data(), u->bytes.size());
      op_done(u->claimed);
    }
  }
  if (!p.in_is_text) return;
  p.in_is_text = false;
  std::string text = std::move(p.in_text);
  switch (h.kind) {
    case FrameKind::nack: {
      auto it = p.awaiting_cts.find(h.id);
      if (it == p.awaiting_cts.end()) break;
      OpPtr send = it->second;
      p.awaiting_cts.erase(it);
      op_done(send, error_of(ErrorClass::mismatch, name_of(send->request) + ": " + text));
      break;
    }
    case FrameKind::cancel: {
      auto it = p.awaiting_data.find(h.id);
      if (it == p.awaiting_data.end()) break;
      OpPtr recv = it->second;
      p.awaiting_data.erase(it);
      op_done(recv, error_of(ErrorClass::network,
                             detail::concat(name_of(recv->request), ": ", rank_text(peer),
                                            " gave up its send before the data came: ", text)));
      break;
    }
    case FrameKind::reply:
      p.replies[h.id] = std::move(text);
      break;
    case FrameKind::bye:
      p.gone = detail::concat(rank_text(peer), " left the group: ", text);
      fail_ops_with(peer, ErrorClass::network, p.gone);
      break;
    default:
      break;
  }
}

std::string Engine::State::tag_hint(const PendingOp& op, int peer) const {
  if (op.request.is_send) return "";
  for (const auto& u : unexpected)
    if (u->source == peer && u->header.tag != op.request.tag)
      return detail::concat(" (the messages ", rank_text(peer),
                            " sent that no recv took carry "
                            "tag ",
                            u->header.tag, ", but this recv waits for tag ", op.request.tag,
                            ": a tag mismatch?)");
  return "";
}

void Engine::State::check_gone(int peer) {
  Peer& p = peers[peer];
  if (!p.gone.empty()) return;
  std::string why = channel->broken(peer);
  if (why.empty()) return;
  p.gone = why;
  fail_ops_with(peer, ErrorClass::network, why);
}

// Fails every pending op that needs `peer`, and recvs from any rank once no peer is left.
void Engine::State::fail_ops_with(int peer, ErrorClass error_class, const std::string& why) {
  Peer& p = peers[peer];
  auto fail = [&](const OpPtr& op) {
    if (!op->done)
      op_done(op, error_of(error_class, name_of(op->request) + ": " + why + tag_hint(*op, peer)));
  };
  for (auto& [id, op] : p.awaiting_cts) fail(op);
  for (auto& [id, op] : p.awaiting_data) fail(op);
  p.awaiting_cts.clear();
  p.awaiting_data.clear();
  for (const OpPtr& op : std::vector<OpPtr>(posted_recvs.begin(), posted_recvs.end()))
    if (op->request.peer == peer) fail(op);
  for (const auto& u : unexpected)
    if (u->source == peer && u->claimed && !u->complete) fail(u->claimed);
  if (p.in_recv) fail(std::exchange(p.in_recv, nullptr));
  // Sends still queued toward the peer. A frame cut short would corrupt the stream, and its
  // buffer is the caller's again once the send fails: nothing more goes out then.
  if (!p.out.empty() && p.out.front().written > 0) p.poisoned = true;
  for (OutFrame& f : p.out)
    if (f.completes) fail(f.completes);
  p.out.clear();
  std::erase_if(posted_recvs, [](const OpPtr& op) { return op->done; });
  bool anyone_left = false;
  for (int q = 0; q < size; ++q) anyone_left |= q != rank && peers[q].gone.empty();
  if (!anyone_left) {
    for (const OpPtr& op : std::vector<OpPtr>(posted_recvs.begin(), posted_recvs.end())) fail(op);
    posted_recvs.clear();
  }
}

}  // namespace lockstep::p2p
