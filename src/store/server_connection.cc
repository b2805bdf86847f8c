#include "store/server_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lockstep/core/error.h"

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

void ServerConnection::on_readable(std::span<char> scratch, const RequestFn& on_request) {
  for (int i = 0; i < kMaxReadsPerWake && !dead(); ++i) {
    ssize_t r = ::recv(fd_.get(), scratch.data(), scratch.size(), 0);
    if (r > 0) {
      consume(scratch.data(), scratch.data() + r, on_request);
      if (static_cast<size_t>(r) < scratch.size()) return;
      continue;
    }
    if (r == 0) {
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
  namespace sp = store_proto;
  static const std::string kPrefix = sp::handshake_bytes();
  while (*p < end && !handshaken() && !dead()) {
    const size_t want = stage_ == Stage::hello ? sp::kClientHelloBytes : sp::kClientProofBytes;
    const size_t take = std::min<size_t>(want - handshake_in_.size(), end - *p);
    handshake_in_.append(*p, take);
    *p += take;
    // The prefix is checked byte by byte as it comes: a stray client is dropped at once.
    if (stage_ == Stage::hello &&
        kPrefix.compare(0, std::min(handshake_in_.size(), kPrefix.size()), handshake_in_, 0,
                        std::min(handshake_in_.size(), kPrefix.size())) != 0)
      return mark_dead(
          "bad handshake: not a lockstep store client, or one speaking another protocol "
          "version");
    if (handshake_in_.size() < want) return;
    if (stage_ == Stage::hello) {
      std::memcpy(client_nonce_.data(), handshake_in_.data() + sp::kHandshakeBytes,
                  client_nonce_.size());
      server_nonce_ = auth::make_nonce();
      auth::Proof proof{};
      if (!secret_.empty())
        proof = auth::prove(secret_, auth::Role::server, client_nonce_, server_nonce_);
      out_.append(kPrefix);
      sp::put_u32(out_, secret_.empty() ? 0 : sp::kSecretRequired);
      out_.append(reinterpret_cast<const char*>(server_nonce_.data()), server_nonce_.size());
      out_.append(reinterpret_cast<const char*>(proof.data()), proof.size());
      flush();
      stage_ = Stage::proof;
    } else {
      auth::Proof got;
      std::memcpy(got.data(), handshake_in_.data(), got.size());
      if (!secret_.empty() &&
          !auth::check(secret_, auth::Role::client, server_nonce_, client_nonce_, got))
        return mark_dead(
            "refused: it does not know the job's secret (wrong or missing LOCKSTEP_SECRET)");
      stage_ = Stage::requests;
    }
    handshake_in_.clear();
  }
}

void ServerConnection::consume(const char* p, const char* end, const RequestFn& on_request) {
  if (!handshaken()) check_handshake(&p, end);
  while (p < end && !dead()) {
    auto result = parser_.feed(&p, end);
    if (result == store_proto::MessageParser::Result::invalid)
      return mark_dead("protocol error: " + parser_.error());
    if (result == store_proto::MessageParser::Result::complete && !on_request(parser_.take()))
      return mark_dead("protocol error: a new request arrived before the previous was answered");
  }
}

void ServerConnection::queue(const store_proto::Message& reply) {
  if (dead()) return;
  store_proto::encode(reply, out_);
  flush();
}

void ServerConnection::flush() {
  while (wants_write() && !dead()) {
    ssize_t w = ::send(fd_.get(), out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
    if (w > 0) {
      sent_ += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return mark_dead("send failed: " + net::errno_text(errno));
  }
  if (!wants_write()) {
    if (out_.capacity() > kKeepOutBytes) std::string().swap(out_);
    out_.clear();
    sent_ = 0;
  }
}

}  // namespace lockstep::store_detail
