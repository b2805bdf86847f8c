#include "net/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "lockstep/core/error.h"

namespace lockstep::net {

auth::ConnectProof send_hello(int fd, const Hello& hello, const std::string& secret,
                              const auth::Nonce& challenge, Deadline deadline,
                              const std::string& what) {
  write_full(fd, &hello, sizeof(hello), deadline, what);
  auth::ConnectProof sent;
  if (!secret.empty()) {
    sent = auth::make_connect_proof(secret, challenge);
    write_full(fd, &sent, sizeof(sent), deadline, what);
  }
  return sent;
}

bool send_verdict(int fd, const auth::Verdict& verdict) {
  return ::send(fd, &verdict, sizeof(verdict), MSG_DONTWAIT | MSG_NOSIGNAL) ==
         static_cast<ssize_t>(sizeof(verdict));
}

HelloReader::HelloReader(Fd fd, std::string remote, Clock::time_point give_up)
    : fd_(std::move(fd)), remote_(std::move(remote)), give_up_(give_up) {}

HelloReader::State HelloReader::advance(const Endpoint& me) {
  if (!problem_.empty()) return State::dropped;
  for (;;) {
    const bool in_hello = got_ < sizeof(Hello);
    const size_t want = in_hello ? sizeof(Hello) : sizeof(Hello) + sizeof(auth::ConnectProof);
    if (got_ == want) return State::ready;
    auto* at = in_hello ? reinterpret_cast<char*>(&hello_) + got_
                        : reinterpret_cast<char*>(&proof_) + (got_ - sizeof(Hello));
    const ssize_t n = ::recv(fd_.get(), at, want - got_, MSG_DONTWAIT);
    if (n > 0) {
      got_ += static_cast<size_t>(n);
      if (got_ < want) continue;
      if (in_hello) {
        problem_ = hello_problem(hello_, me);
        if (!problem_.empty()) return State::dropped;
        if (has_secret()) continue;  // its proof follows
      }
      return State::ready;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Clock::now() < give_up_) return State::reading;
      problem_ = got_ == 0              ? "it sent no hello"
                 : got_ < sizeof(Hello) ? "its hello stopped short"
                                        : "it sent no proof";
    } else {
      problem_ = n == 0 ? "it closed before its hello ended" : "it failed: " + errno_text(errno);
    }
    return State::dropped;
  }
}

HelloReader::State HelloReader::finish(const Endpoint& me) {
  for (;;) {
    const State s = advance(me);
    if (s != State::reading) return s;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(give_up_ - Clock::now());
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0) + 1));
  }
}

auth::Verdict HelloReader::judge(const std::string& secret, const auth::Nonce& challenge) const {
  return auth::judge(secret, challenge, has_secret(), proof_);
}

}  // namespace lockstep::net
