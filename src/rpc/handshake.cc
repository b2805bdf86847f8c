#include "rpc/handshake.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lockstep/rpc/errors.h"
#include "net/socket.h"

namespace lockstep::rpc {

namespace {

// Why `listener` refused this process, in the connector's words.
std::string refused_text(auth::VerdictStatus status, const std::string& listener) {
  switch (status) {
    case auth::VerdictStatus::secret_missing:
      return "this process has no job secret, and " + listener +
             " has one: give every worker the same LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE";
    case auth::VerdictStatus::no_secret_here:
      return "this process has a job secret, and " + listener + " has none";
    case auth::VerdictStatus::wrong_proof:
      return listener +
             " did not accept this process's proof: the two have different job "
             "secrets (LOCKSTEP_SECRET / LOCKSTEP_SECRET_FILE)";
    case auth::VerdictStatus::accepted:
      break;
  }
  return "refused";
}

bool send_now(int fd, const void* data, size_t n) {
  ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  return w == static_cast<ssize_t>(n);  // a fresh socket's buffer takes these few bytes at once
}

}  // namespace

void connect_handshake(int fd, const net::Endpoint& me, const std::string& secret,
                       Deadline deadline, const std::string& listener) {
  struct {
    net::Hello hello;
    auth::Nonce nonce;
  } open{net::make_hello(me), auth::make_nonce()};
  net::write_full(fd, &open, sizeof open, deadline, listener);
  Challenge c;
  try {
    net::read_full(fd, &c, sizeof c, deadline, listener);
  } catch (const NetworkError& e) {
    throw NetworkError(
        detail::concat("rpc: ", listener, " dropped the connection before answering its opening (",
                       e.what(), "): is that port a lockstep rpc worker of this job?"));
  }
  if (c.magic != Challenge::kMagic)
    throw NetworkError(
        detail::concat("rpc: ", listener, " answered with something that is not lockstep rpc's"));
  if (c.status != auth::VerdictStatus::accepted)
    throw NotAuthorized(detail::concat("rpc: ", listener, " refused the connection: ",
                                       refused_text(c.status, listener)),
                        listener);
  auth::Proof mine{};
  if (!secret.empty()) {
    if (!auth::check(secret, auth::Role::server, open.nonce, c.nonce, c.proof))
      throw NotAuthorized(
          detail::concat("rpc: ", listener,
                         " could not prove it knows the job's secret (LOCKSTEP_SECRET / "
                         "LOCKSTEP_SECRET_FILE differ): it is not a worker of this job"),
          listener);
    mine = auth::prove(secret, auth::Role::client, c.nonce, open.nonce);
  }
  net::write_full(fd, &mine, sizeof mine, deadline, listener);
  auth::Verdict v;
  net::read_full(fd, &v, sizeof v, deadline, listener);
  if (v.magic != auth::Verdict::kMagic)
    throw NetworkError(detail::concat("rpc: ", listener, " sent a malformed verdict"));
  if (v.status != auth::VerdictStatus::accepted)
    throw NotAuthorized(detail::concat("rpc: ", listener, " refused the connection: ",
                                       refused_text(v.status, listener)),
                        listener);
}

ServerHandshake::State ServerHandshake::drop(std::string why) {
  problem_ = std::move(why);
  return State::dropped;
}

// Reads up to `want` bytes into `into` at got_; false when the connection ended or failed.
bool ServerHandshake::read_some(int fd, char* into, size_t want) {
  while (got_ < want) {
    ssize_t n = ::recv(fd, into + got_, want - got_, MSG_DONTWAIT);
    if (n > 0) {
      got_ += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

ServerHandshake::State ServerHandshake::advance(int fd, const net::Endpoint& me,
                                                const std::string& secret) {
  if (Clock::now() >= give_up_) return drop("it did not finish its opening in time");
  if (!challenged_) {
    if (!read_some(fd, in_, sizeof in_)) return drop("it closed during its opening");
    // Four bytes say whether this is a lockstep peer at all: anything else goes at once.
    uint32_t magic = 0;
    if (got_ >= 4) std::memcpy(&magic, in_, 4);
    if (got_ >= 4 && magic != net::kHelloMagic)
      return drop("it does not speak lockstep rpc (its first bytes are not a lockstep hello)");
    if (got_ < sizeof in_) return State::working;
    std::memcpy(&hello_, in_, sizeof hello_);
    std::memcpy(theirs_.data(), in_ + sizeof hello_, theirs_.size());
    if (std::string p = net::hello_problem(hello_, me); !p.empty()) return drop(p);
    Challenge c;
    bool has = (hello_.flags & net::kHasSecret) != 0;
    if (!secret.empty() && !has) c.status = auth::VerdictStatus::secret_missing;
    if (secret.empty() && has) c.status = auth::VerdictStatus::no_secret_here;
    mine_ = auth::make_nonce();
    c.nonce = mine_;
    if (!secret.empty()) c.proof = auth::prove(secret, auth::Role::server, theirs_, mine_);
    if (!send_now(fd, &c, sizeof c)) return drop("it left before the challenge");
    if (c.status != auth::VerdictStatus::accepted) return drop(auth::refusal_text(c.status));
    challenged_ = true;
    got_ = 0;
  }
  if (!read_some(fd, reinterpret_cast<char*>(proof_.data()), proof_.size()))
    return drop("it closed before proving the job's secret");
  if (got_ < proof_.size()) return State::working;
  auth::Verdict v;
  if (!secret.empty() && !auth::check(secret, auth::Role::client, mine_, theirs_, proof_))
    v.status = auth::VerdictStatus::wrong_proof;
  send_now(fd, &v, sizeof v);
  if (v.status != auth::VerdictStatus::accepted) return drop(auth::refusal_text(v.status));
  return State::done;
}

}  // namespace lockstep::rpc
