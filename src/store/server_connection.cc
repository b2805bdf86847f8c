#include "store/server_connection.h"

#include <sys/socket.h>

#include <cerrno>

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
  using Result = store_proto::ClientHandshakeReader::Result;
  while (*p < end && !handshaken() && !dead()) {
    switch (handshake_.feed(p, end)) {
      case Result::need_more:
        return;
      case Result::bad_prefix:
        return mark_dead(
            "bad handshake: not a lockstep store client, or one speaking another protocol "
            "version");
      case Result::hello: {
        server_nonce_ = auth::make_nonce();
        auth::Proof proof{};
        if (!secret_.empty())
          proof = auth::prove(secret_, auth::Role::server, handshake_.client_nonce(), server_nonce_);
        out_.append(store_proto::server_hello(!secret_.empty(), server_nonce_, proof));
        flush();
        break;
      }
      case Result::proof:
        if (!secret_.empty() && !auth::check(secret_, auth::Role::client, server_nonce_,
                                             handshake_.client_nonce(), handshake_.proof()))
          return mark_dead(
              "refused: it does not know the job's secret (wrong or missing LOCKSTEP_SECRET)");
        proof_accepted_ = true;
        break;
    }
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
