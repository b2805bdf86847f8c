#include "store/server_connection.h"

#include <sys/socket.h>

#include <cerrno>

#include "lockstep/core/error.h"
#include "store/server_limits.h"

namespace lockstep::store_detail {

namespace {
// Reads per wake-up before the server turns to other connections (fairness).
constexpr int kMaxReadsPerWake = 16;
// Reply buffers larger than this are released once sent.
constexpr size_t kKeepOutBytes = 1 << 20;
}  // namespace

ServerConnection::ServerConnection(uint64_t id, net::Fd fd, Deadline handshake_deadline,
                                   std::string_view secret)
    : id_(id),
      fd_(std::move(fd)),
      peer_(net::peer_address(fd_.get())),
      handshake_deadline_(handshake_deadline),
      secret_(secret) {}

void ServerConnection::mark_dead(std::string reason) {
  if (reason_.empty()) reason_ = std::move(reason);
}

void ServerConnection::refuse(std::string reason) {
  if (reason_.empty()) refused_ = true;
  mark_dead(std::move(reason));
}

namespace {
// Bytes a transfer must move in each window of kTransferGrace.
constexpr uint64_t kWindowBytes =
    store_limits::kMinTransferRate *
    std::chrono::duration_cast<std::chrono::seconds>(store_limits::kTransferGrace).count();
}  // namespace

void ServerConnection::Transfer::moved(uint64_t n, Clock::time_point now) {
  bytes += n;
  window_bytes += n;
  if (window_bytes >= kWindowBytes) {  // enough for this window: the next starts now
    window_start = now;
    window_bytes = 0;
  }
}

Clock::time_point ServerConnection::Transfer::due() const {
  return window_start + store_limits::kTransferGrace;
}

std::optional<Clock::time_point> ServerConnection::deadline() const {
  if (dead()) return std::nullopt;
  if (!handshaken()) return handshake_deadline_.at();
  std::optional<Clock::time_point> due;
  if (receiving_) due = receiving_->due();
  if (sending_ && (!due || sending_->due() < *due)) due = sending_->due();
  return due;
}

void ServerConnection::mark_overdue() {
  namespace sl = store_limits;
  auto took = [](const Transfer& t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.started).count();
  };
  const std::string rule =
      detail::concat(" (the server asks for ", kWindowBytes, " bytes, or the end, every ",
                     sl::kTransferGrace.count(), " ms)");
  if (!handshaken())
    mark_dead(detail::concat(
        "no handshake within ", sl::kHandshakeTimeout.count(), " ms of connecting (",
        handshake_.reading_hello()
            ? detail::concat(handshake_.have(), " of the hello's ", store_proto::kClientHelloBytes,
                             " bytes arrived)")
            : detail::concat("the hello arrived, and ", handshake_.have(), " of the proof's ",
                             store_proto::kClientProofBytes, " bytes)")));
  else if (receiving_ && receiving_->due() <= Clock::now())
    mark_dead(detail::concat("request arriving too slowly: ", receiving_->bytes, " bytes in ",
                             took(*receiving_), " ms", rule));
  else if (sending_)
    mark_dead(detail::concat("reply taken too slowly: ", sending_->bytes, " of ",
                             out_.size() - sent_ + sending_->bytes, " bytes in ", took(*sending_),
                             " ms", rule));
}

void ServerConnection::on_readable(std::span<char> scratch, const RequestFn& on_request) {
  for (int i = 0; i < kMaxReadsPerWake && !dead(); ++i) {
    ssize_t r = ::recv(fd_.get(), scratch.data(), scratch.size(), 0);
    if (r > 0) {
      consume(scratch.data(), scratch.data() + r, on_request);
      if (static_cast<size_t>(r) < scratch.size()) return;
      continue;
    }
    if (r == 0) {
      if (!handshaken() && !handshake_.reading_hello()) {
        // It had the server's hello and sent no proof: the client refused the server.
        turned_away_ = true;
        return mark_dead(secret_.empty()
                             ? "it left after the store's hello: it has a secret (LOCKSTEP_SECRET "
                               "or LOCKSTEP_SECRET_FILE) and this store has none"
                             : "it left after the store's hello: it does not know this store's "
                               "secret (another LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE, or none)");
      }
      bool mid = !handshaken() || parser_.mid_message();
      return mark_dead(mid ? "closed by the client in the middle of a message"
                           : "closed by the client");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return mark_dead("receive failed: " + net::errno_text(errno));
  }
}

void ServerConnection::check_handshake(const char** p, const char* end) {
  using Result = store_proto::ClientHandshakeReader::Result;
  while (*p < end && !handshaken() && !dead()) {
    switch (handshake_.feed(p, end)) {
      case Result::need_more:
        return;
      case Result::bad_prefix:
        turned_away_ = true;
        return mark_dead(
            "bad handshake: not a lockstep store client, or one speaking another protocol "
            "version");
      case Result::hello: {
        server_nonce_ = auth::make_nonce();
        auth::Proof proof{};
        if (!secret_.empty())
          proof =
              auth::prove(secret_, auth::Role::server, handshake_.client_nonce(), server_nonce_);
        out_.append(store_proto::server_hello(!secret_.empty(), server_nonce_, proof));
        flush();
        break;
      }
      case Result::proof:
        if (!secret_.empty() && !auth::check(secret_, auth::Role::client, server_nonce_,
                                             handshake_.client_nonce(), handshake_.proof())) {
          turned_away_ = true;
          return mark_dead(
              "refused: it does not know the job's secret (another LOCKSTEP_SECRET or "
              "LOCKSTEP_SECRET_FILE)");
        }
        proof_accepted_ = true;
        break;
    }
  }
}

void ServerConnection::consume(const char* p, const char* end, const RequestFn& on_request) {
  if (!handshaken()) check_handshake(&p, end);
  while (p < end && !dead()) {
    const auto now = Clock::now();
    if (!receiving_) receiving_.emplace(now);
    const char* from = p;
    auto result = parser_.feed(&p, end);
    receiving_->moved(static_cast<uint64_t>(p - from), now);
    if (result == store_proto::MessageParser::Result::invalid)
      return refuse("protocol error: " + parser_.error());
    if (result == store_proto::MessageParser::Result::complete) {
      receiving_.reset();
      if (!on_request(parser_.take()))
        return refuse("protocol error: a new request arrived before the previous was answered");
    }
  }
}

void ServerConnection::queue(const store_proto::Message& reply) {
  if (dead()) return;
  store_proto::encode(reply, out_);
  flush();
}

void ServerConnection::flush() {
  // The handshake's own deadline covers the server's hello.
  if (wants_write() && handshaken() && !sending_) sending_.emplace(Clock::now());
  while (wants_write() && !dead()) {
    ssize_t w = ::send(fd_.get(), out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
    if (w > 0) {
      sent_ += static_cast<size_t>(w);
      if (sending_) sending_->moved(static_cast<uint64_t>(w), Clock::now());
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return mark_dead("send failed: " + net::errno_text(errno));
  }
  if (!wants_write()) {
    sending_.reset();
    if (out_.capacity() > kKeepOutBytes) std::string().swap(out_);
    out_.clear();
    sent_ = 0;
  }
}

}  // namespace lockstep::store_detail
