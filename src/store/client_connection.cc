#include "store/client_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "lockstep/core/error.h"
#include "store/handshake.h"

namespace lockstep::store_detail {

namespace {

constexpr size_t kReceiveChunk = 64 * 1024;

// Waits for events on fd until deadline; false on timeout.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw NetworkError("poll failed: " + net::errno_text(errno));
  }
}

}  // namespace

ClientConnection::ClientConnection(const std::string& host, uint16_t port, Deadline deadline,
                                   const std::string& secret)
    : where_(detail::concat("lockstep store server at ", host, ":", port)),
      scratch_(new char[kReceiveChunk]) {
  fd_ = net::connect_tcp(host, port, deadline, /*log_progress=*/true);
  net::tune_tcp(fd_.get(), 0);
  net::set_nonblocking(fd_.get(), true);
  local_address_ = net::local_address(fd_.get());
  // A server that accepted must also answer the handshake; allow it a moment even when the
  // connection deadline is nearly spent.
  handshake(Deadline(std::max(deadline.at(), Clock::now() + milliseconds(2000))), secret);
}

void ClientConnection::handshake(Deadline deadline, const std::string& secret) {
  namespace sp = store_proto;
  const auth::Nonce mine = auth::make_nonce();
  std::string hello = sp::handshake_bytes();
  hello.append(reinterpret_cast<const char*>(mine.data()), mine.size());
  send_all("handshake", hello.data(), hello.size(), deadline);
  try {
    while (in_.size() < sp::kServerHelloBytes)
      in_.append(scratch_.get(), receive_some("handshake", deadline));
  } catch (const NetworkError&) {
    throw NetworkError(detail::concat(
        where_,
        " closed the connection during the handshake: it is not a lockstep store, or "
        "runs a different lockstep version. Check MASTER_ADDR/MASTER_PORT and that every "
        "process uses the same lockstep build."));
  }
  const auth::Nonce theirs = sp::check_server_hello(in_, secret, mine, where_);
  auth::Proof proof{};
  if (!secret.empty()) proof = auth::prove(secret, auth::Role::client, theirs, mine);
  send_all("handshake", reinterpret_cast<const char*>(proof.data()), proof.size(), deadline);
  in_pos_ = sp::kServerHelloBytes;
}

store_proto::Message ClientConnection::call(const char* op, const store_proto::Message& request,
                                            Deadline deadline) {
  if (!broken_.empty())
    throw NetworkError(detail::concat("store ", op, " cannot run: the connection to ", where_,
                                      " was closed after an earlier failure (", broken_, ")"));
  out_.clear();
  store_proto::encode(request, out_);
  send_all(op, out_.data(), out_.size(), deadline);
  for (;;) {
    if (in_pos_ < in_.size()) {
      const char* p = in_.data() + in_pos_;
      bool done = parse(op, &p, in_.data() + in_.size());
      in_pos_ = static_cast<size_t>(p - in_.data());
      if (done) return parser_.take();
    }
    size_t n = receive_some(op, deadline);
    const char* p = scratch_.get();
    const char* end = p + n;
    bool done = parse(op, &p, end);
    in_.assign(p, end);  // bytes after a complete reply (none from a well-behaved server)
    in_pos_ = 0;
    if (done) return parser_.take();
  }
}

bool ClientConnection::parse(const char* op, const char** p, const char* end) {
  auto result = parser_.feed(p, end);
  if (result == store_proto::MessageParser::Result::invalid)
    fail_network(op, "malformed reply: " + parser_.error());
  return result == store_proto::MessageParser::Result::complete;
}

void ClientConnection::send_all(const char* op, const char* data, size_t n, Deadline deadline) {
  while (n > 0) {
    ssize_t w = ::send(fd_.get(), data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_.get(), POLLOUT, deadline)) fail_timeout(op, "sending the request");
    } else {
      const int e = errno;
      fail_network(op, "send failed: " + net::errno_text(e), e);
    }
  }
}

size_t ClientConnection::receive_some(const char* op, Deadline deadline) {
  for (;;) {
    ssize_t r = ::recv(fd_.get(), scratch_.get(), kReceiveChunk, 0);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) fail_network(op, "the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      const int e = errno;
      fail_network(op, "receive failed: " + net::errno_text(e), e);
    }
    if (!wait_for(fd_.get(), POLLIN, deadline)) fail_timeout(op, "waiting for the reply");
  }
}

void ClientConnection::fail_timeout(const char* op, const std::string& what) {
  broken_ = detail::concat("timed out ", what, " of ", op);
  fd_.reset();
  throw TimeoutError(detail::concat(
      "store ", op, " to ", where_, " timed out ", what,
      "; the server is alive but did not answer in time (overloaded, or stopped by a debugger?). "
      "The connection is closed; create a new store client to retry."));
}

void ClientConnection::fail_network(const char* op, const std::string& what, int err) {
  broken_ = what;
  fd_.reset();
  if (net::is_unreachable(err))
    throw NetworkError(detail::concat("store ", op, " failed: the store's host ", where_,
                                      " is unreachable: ", net::unreachable_text(err),
                                      ". Fix: check that host and the network toward it"));
  throw NetworkError(detail::concat(
      "store ", op, " failed: lost the connection to ", where_, " (", what,
      "). The process hosting the store (usually rank 0 or the launcher) has probably exited or "
      "crashed: check its output."));
}

}  // namespace lockstep::store_detail
