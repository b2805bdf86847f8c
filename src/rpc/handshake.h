// The opening of every RPC connection: a challenge-response with fresh nonces on both sides, so
// that each side proves it knows the job's secret (src/net/auth.h) and a recorded exchange is
// useless on another connection.
//
//   connector: Hello (service rpc, src/net/hello.h) + its nonce Nc            (136 bytes)
//   listener:  Challenge: a status, its nonce Ns, prove(server, Nc, Ns)        (72 bytes)
//   connector: checks that proof; prove(client, Ns, Nc)                        (32 bytes)
//   listener:  auth::Verdict: accepted, or refused and closed                  (40 bytes)
//
// The listener reads it without blocking (ServerHandshake, driven by the agent's poller) and
// drops at once anything that does not begin with a lockstep hello: a port scanner, a pickle,
// another service. Without a secret on either side the proofs are skipped (docs/rpc.md).
#pragma once

#include <string>

#include "lockstep/core/deadline.h"
#include "net/auth.h"
#include "net/hello.h"
#include "net/peer_auth.h"

namespace lockstep::rpc {

struct Challenge {
  static constexpr uint32_t kMagic = 0x48435043;  // "CPCH"
  uint32_t magic = kMagic;
  auth::VerdictStatus status = auth::VerdictStatus::accepted;
  auth::Nonce nonce{};
  auth::Proof proof{};
};
static_assert(sizeof(Challenge) == 72, "Challenge is a wire format");

// The connector's side, blocking until `deadline`. `listener` names the worker in errors.
// NotAuthorized when either side's proof fails or the secrets differ; NetworkError when the
// listener drops the connection or sends something else.
void connect_handshake(int fd, const net::Endpoint& me, const std::string& secret,
                       Deadline deadline, const std::string& listener);

class ServerHandshake {
 public:
  enum class State { working, done, dropped };
  ServerHandshake(std::string remote, Clock::time_point give_up)
      : remote_(std::move(remote)), give_up_(give_up) {}
  // Reads what has arrived and answers (non-blocking fd). dropped: problem() says why.
  State advance(int fd, const net::Endpoint& me, const std::string& secret);
  int peer_rank() const { return hello_.rank; }
  std::string peer_host() const { return net::host_of(hello_); }
  int peer_pid() const { return hello_.pid; }
  const std::string& problem() const { return problem_; }
  // Whether it ended before sending a byte (a liveness probe): not worth a log line.
  bool silent() const { return !challenged_ && got_ == 0; }
  const std::string& remote() const { return remote_; }
  Clock::time_point give_up() const { return give_up_; }

 private:
  State drop(std::string why);
  bool read_some(int fd, char* into, size_t want);
  std::string remote_;
  Clock::time_point give_up_;
  net::Hello hello_{};
  auth::Nonce theirs_{};
  auth::Nonce mine_{};
  auth::Proof proof_{};
  char in_[sizeof(net::Hello) + sizeof(auth::Nonce)] = {};
  size_t got_ = 0;
  bool challenged_ = false;
  std::string problem_;
};

}  // namespace lockstep::rpc
