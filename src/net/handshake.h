// The opening of every data-plane connection between two ranks (the tcp mesh's, the p2p socket
// channel's), both sides, with [The exchange] of src/net/peer_auth.h:
//
//   connector: Hello (src/net/hello.h), then with a secret its ConnectProof  -> send_hello
//   listener:  reads exactly those bytes, judges them                         -> HelloReader
//   listener:  its Verdict (always)                                           -> send_verdict
//   connector: checks the verdict (auth::check_verdict)
//
// What each service sends after that is its own (the mesh: the listener's hello back, then
// frames; the p2p channel: the stream).
#pragma once

#include <string>

#include "lockstep/core/deadline.h"
#include "net/hello.h"
#include "net/peer_auth.h"
#include "net/socket.h"

namespace lockstep::net {

// Writes `hello` and, with a secret, the proof for the listener's `challenge` on a connected
// socket, blocking until `deadline` (what: names the listener in errors). Returns the proof sent
// (for check_verdict; unset without a secret).
auth::ConnectProof send_hello(int fd, const Hello& hello, const std::string& secret,
                              const auth::Nonce& challenge, Deadline deadline,
                              const std::string& what);

// Sends a verdict on a fresh connection without blocking (40 bytes: the kernel's buffer takes them
// at once). False when the connector has gone.
bool send_verdict(int fd, const auth::Verdict& verdict);

// The listener's side: reads a newcomer's hello and proof as they arrive, without blocking and
// never past them (what follows is the service's), and judges them.
class HelloReader {
 public:
  enum class State { reading, ready, dropped };

  // remote: the connection's "ip:port", for messages; give_up: when a newcomer that has not said
  // everything is dropped.
  HelloReader(Fd fd, std::string remote, Clock::time_point give_up);

  // Reads what has arrived. ready: the hello (and proof) are in and the hello is acceptable for
  // `me`; dropped: it is not (problem() says why), it closed, or give_up passed.
  State advance(const Endpoint& me);
  // Blocks in advance() until it is not reading any more (poll between reads).
  State finish(const Endpoint& me);

  const Hello& hello() const { return hello_; }
  bool has_secret() const { return (hello_.flags & kHasSecret) != 0; }
  // ready: this listener's verdict on the newcomer (src/net/peer_auth.h).
  auth::Verdict judge(const std::string& secret, const auth::Nonce& challenge) const;
  const std::string& problem() const { return problem_; }
  const std::string& remote() const { return remote_; }
  Fd& fd() { return fd_; }
  Clock::time_point give_up() const { return give_up_; }

 private:
  Fd fd_;
  std::string remote_;
  Clock::time_point give_up_;
  Hello hello_{};
  auth::ConnectProof proof_{};
  size_t got_ = 0;  // of the hello, then of the proof
  std::string problem_;
};

}  // namespace lockstep::net
