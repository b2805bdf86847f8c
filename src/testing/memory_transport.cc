#include "testing/memory_transport.h"

#include <cstring>

#include "lockstep/core/error.h"

namespace lockstep::testing {

namespace {

std::vector<std::byte> frame(const MessageHeader& h, const void* payload, size_t bytes) {
  std::vector<std::byte> out(sizeof h + bytes);
  std::memcpy(out.data(), &h, sizeof h);
  if (bytes > 0) std::memcpy(out.data() + sizeof h, payload, bytes);
  return out;
}

std::string rank_text(int rank) {
  return "rank " + std::to_string(rank);
}

}  // namespace

MemoryTransport::MemoryTransport(std::shared_ptr<FaultController> faults, int rank)
    : faults_(std::move(faults)), rank_(rank), recvs_(static_cast<size_t>(faults_->size())) {}

void MemoryTransport::begin_op(const Op& op) {
  op_ = &op;
  finished_.clear();
  outstanding_ = 0;
  for (auto& r : recvs_) r.clear();
}

void MemoryTransport::end_op() {
  op_ = nullptr;
  finished_.clear();
  outstanding_ = 0;
  for (auto& r : recvs_) r.clear();
}

std::string MemoryTransport::op_name() const {
  return op_ ? op_->name() : "setup";
}

void MemoryTransport::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank_)
    throw InvalidArgument(detail::concat(op_name(), ": ", what, " to/from rank ", peer, " on rank ",
                                         rank_, " (group of ", size(), ")"));
  if (!op_) throw InvalidArgument(detail::concat(what, " outside an op (begin_op first)"));
}

Transport::Request MemoryTransport::post_send(int peer, const void* data, size_t bytes) {
  check_peer(peer, "post_send");
  const Request id = finished_.size();
  finished_.push_back(1);  // the link takes the packet whole
  if (faults_->send(rank_, peer, frame(data_header(*op_, bytes), data, bytes)) ==
      FaultController::Fate::refused)
    fail_cut(peer);
  return id;
}

Transport::Request MemoryTransport::post_recv(int peer, void* data, size_t bytes) {
  check_peer(peer, "post_recv");
  const Request id = finished_.size();
  finished_.push_back(0);
  ++outstanding_;
  recvs_[static_cast<size_t>(peer)].push_back({id, data, bytes});
  return id;
}

void MemoryTransport::wait(Request r) {
  for (;;) {
    progress();
    if (finished_.at(r)) return;
    block();
  }
}

void MemoryTransport::wait_all() {
  for (;;) {
    progress();
    if (outstanding_ == 0) return;
    block();
  }
}

void MemoryTransport::block() {
  if (op_->deadline.expired()) fail_timeout();
  faults_->wait_change(rank_, seen_, op_->deadline.at());
}

void MemoryTransport::progress() {
  seen_ = faults_->epoch();  // before the look: a change after it ends the next block()
  for (int p = 0; p < size(); ++p)
    if (p != rank_ && !faults_->cut_reason(rank_, p).empty()) fail_cut(p);
  for (int p = 0; p < size(); ++p) {
    if (p == rank_) continue;
    auto& pending = recvs_[static_cast<size_t>(p)];
    if (pending.empty()) {
      check_unread_peer(p);
      continue;
    }
    while (!pending.empty()) {
      auto packet = faults_->take(p, rank_);
      if (!packet) break;
      receive(p, *packet);
    }
  }
}

// A packet from `peer` while a receive from it is pending.
void MemoryTransport::receive(int peer, const Packet& p) {
  MessageHeader h;
  if (p.end || p.bytes.size() < sizeof h)
    throw NetworkError(detail::concat(op_name(), ": ", rank_text(peer),
                                      " sent a packet that is not a lockstep frame"));
  std::memcpy(&h, p.bytes.data(), sizeof h);
  const size_t payload = p.bytes.size() - sizeof h;
  if (!header_is_valid(h) || h.payload_bytes != payload)
    throw NetworkError(detail::concat(op_name(), ": ", rank_text(peer),
                                      " sent bytes that are not a lockstep frame"));
  if (h.frame == FrameType::abort) {
    const auto cls = payload > 0 ? static_cast<ErrorClass>(p.bytes[sizeof h]) : ErrorClass::other;
    const std::string text(reinterpret_cast<const char*>(p.bytes.data()) + sizeof h + 1,
                           payload > 0 ? payload - 1 : 0);
    throw_as(peer_class(cls), relayed(text, rank_text(peer), rank_, op_name()));
  }
  if (h.frame == FrameType::bye)
    throw NetworkError(detail::concat(
        rank_text(peer), " shut down its process group while rank ", rank_, " waits in ", op_name(),
        " (ranks called different numbers of collectives?). Fix: every rank must issue ",
        "the same collectives before destroying the group"));
  auto& pending = recvs_[static_cast<size_t>(peer)];
  const Recv r = pending.front();
  if (auto text = header_mismatch(h, r.bytes, {.op = *op_, .rank = rank_, .peer = peer}))
    throw MismatchError(*text);
  if (r.bytes > 0) std::memcpy(r.data, p.bytes.data() + sizeof h, r.bytes);
  pending.erase(pending.begin());
  finished_.at(r.id) = 1;
  --outstanding_;
}

// A peer this rank does not read from now: only its abort matters now.
void MemoryTransport::check_unread_peer(int peer) {
  auto head = faults_->peek(peer, rank_, sizeof(MessageHeader));
  if (!head || head->size() < sizeof(MessageHeader)) return;
  MessageHeader h;
  std::memcpy(&h, head->data(), sizeof h);
  if (header_is_valid(h) && h.frame == FrameType::abort) receive(peer, *faults_->take(peer, rank_));
}

void MemoryTransport::fail_cut(int peer) const {
  throw NetworkError(detail::concat(op_name(), ": lost connection to ", rank_text(peer), ": ",
                                    faults_->cut_reason(rank_, peer)));
}

void MemoryTransport::fail_timeout() const {
  std::string waiting;
  for (int p = 0; p < size(); ++p) {
    const size_t n = recvs_[static_cast<size_t>(p)].size();
    if (n > 0)
      waiting += detail::concat(waiting.empty() ? "" : ", ", rank_text(p), " (", n, " message(s))");
  }
  std::string s = detail::concat(op_->describe(), " timed out on rank ", rank_);
  if (!waiting.empty()) s += "; still waiting for data from " + waiting;
  throw TimeoutError(s);
}

void MemoryTransport::send_control(int peer, FrameType type, const std::string& payload) {
  faults_->send(rank_, peer,
                frame(control_header(type, payload.size()), payload.data(), payload.size()));
}

void MemoryTransport::abort(ErrorClass error_class, const std::string& reason) {
  std::string payload(1, static_cast<char>(error_class));
  payload += reason;
  for (int p = 0; p < size(); ++p)
    if (p != rank_) send_control(p, FrameType::abort, payload);
  end_op();
}

void MemoryTransport::goodbye() {
  for (int p = 0; p < size(); ++p)
    if (p != rank_) send_control(p, FrameType::bye, "");
  end_op();
}

}  // namespace lockstep::testing
