// SocketChannel: the Channel of tcp and hier groups, over TCP, one connection per direction.
//
// The writer makes each connection, on its first write() to a peer; the reader only accepts, so
// two ranks never race to connect to each other. The constructor listens on an ephemeral port
// (bound to the advertise address when it can be, else to all interfaces; LOCKSTEP_BIND_ADDR
// overrides) and publishes its ListenerRecord for the p2p service (src/net/listener_record.h). A
// first write() looks the peer's record up and connects (blocking, until the write's deadline; a
// peer that keeps refusing for a couple of seconds has exited, and is reported as such; after
// closing(), at the first refusal), then opens as every data connection does
// (src/net/handshake.h): its hello, and with a secret its proof for the listener's challenge.
// The socket is then non-blocking with TCP_NODELAY, and write() is one
// send(MSG_DONTWAIT). The reader reads nothing of the stream before the proof checks out, and
// answers with a verdict (its only bytes ever) when its engine next services the listener; the
// writer checks it as it arrives (write() and broken() look, without blocking): a refusal, a
// reader that cannot prove the secret, or one that says nothing for 5 s fails the stream
// (AuthError from write()).
//
// service() accepts without blocking and reads each newcomer's hello (and proof) as it arrives
// (net::HelloReader); a
// connection whose hello is garbage, of another group, of a rank out of range or already
// connected, whose proof fails, or that says nothing for 5 s, is closed with an info log naming
// its address, without disturbing the streams; it never gets a byte of them. read() is one recv
// from the peer's inbound socket; EOF and resets are remembered for broken(), which reports them
// once read() has returned every byte before them.
//
// Orderly close: close() sets store_key(config, "socket_closed", rank), then shuts down the write
// side of every outbound socket, so peers read everything and then EOF. An EOF with that key set
// is "closed its end of the stream"; without it the peer's kernel closed the socket for a dead
// (or channel-dropping) process.
//
// Readiness: service() polls every inbound socket once per round (zero timeout) and sleep()'s
// poll marks what it saw; read() skips the recv of a peer seen idle since its last short read.
// So an idle round costs one poll(2), not one recv per peer. sleep() does not wait on a peer so
// marked (its bytes, or its EOF, are there for read()): a caller that leaves a peer unread does
// not spin, and one that reads until read() returns 0 before sleeping misses nothing.
//
// Threads (channel.h [Threads]): sleep() polls a snapshot of the descriptors taken under mu_;
// everything that snapshot reads is changed under mu_ only. A descriptor dropped while a sleep()
// runs (a rejected newcomer, the listener at close) is closed by the last sleeper to finish, so
// a concurrent poll never sees its number reused.
//
// Limit: a peer that never wrote to this rank has no connection here, so its close or death is
// not seen here (the engine's deadline covers that).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/group_config.h"
#include "net/handshake.h"
#include "net/peer_auth.h"
#include "net/socket.h"
#include "p2p/channel.h"

namespace lockstep::p2p {

class SocketChannel final : public Channel {
 public:
  // Listens and publishes this rank's address in config.store. Throws NetworkError when it
  // cannot listen.
  explicit SocketChannel(const GroupConfig& config);
  ~SocketChannel() override;
  SocketChannel(const SocketChannel&) = delete;
  SocketChannel& operator=(const SocketChannel&) = delete;

  const char* kind() const override { return "socket"; }
  size_t write(int peer, const std::byte* data, size_t bytes, Deadline deadline) override;
  size_t read(int peer, std::byte* data, size_t bytes) override;
  std::string broken(int peer) override;
  void service() override;
  void sleep(Clock::time_point until, std::span<const int> want_room) override;
  void wake() override;
  void closing() override { leaving_ = true; }
  void close() override;

  // The "host:port" this rank published.
  const std::string& address() const { return address_; }

 private:
  enum class Inbound { none, open, eof, reset };
  struct Peer {
    // Outbound: made by write().
    std::string address;      // "host:port" from the store ("" until looked up)
    auth::Nonce challenge{};  // published with it
    auth::ConnectProof sent;  // this rank's proof for the challenge (with a secret)
    auth::Verdict verdict;    // the reader's answer, as it arrives (check_verdict)
    size_t verdict_got = 0;
    Clock::time_point verdict_by{};  // when a reader that said nothing is given up on
    bool out_auth_failed = false;    // out_error is the verdict's
    net::Fd out;                     // the socket; assigned under mu_
    bool out_pollable = false;       // under mu_: connected and not failed
    std::string out_error;           // why sending failed ("" while fine)
    // Inbound: accepted by service().
    net::Fd in;                         // assigned under mu_
    Inbound in_state = Inbound::none;   // changed under mu_
    int in_errno = 0;                   // for Inbound::reset
    int pid = 0;                        // from the hello
    std::string host;                   // from the hello
    std::string remote;                 // the inbound socket's remote "ip:port"
    std::atomic<bool> readable{false};  // a recv may find something
    std::string why;                    // broken()'s final answer, once known
  };
  using Pending = net::HelloReader;

  void check_peer(int peer) const;
  std::string prefix() const;
  std::string describe(int peer) const;
  void connect(int peer, Deadline deadline);
  void check_verdict(Peer& p, int peer);
  void accept_new();
  // Reads what has come of a newcomer's hello and proof; true when it is settled (taken or
  // dropped).
  bool advance(Pending& q);
  // The newcomer's hello and proof are in: judges it, answers, and takes it or drops it.
  void settle(Pending& q);
  void note_refusal(const std::string& text);
  void end_inbound(Peer& p, Inbound state, int err);
  bool has_unread(Peer& p);
  // Closes fd now, or hands it to the last running sleep(). Needs mu_.
  void retire(net::Fd fd);

  GroupConfig config_;
  const int rank_;
  const int size_;
  net::Endpoint me_;       // this rank's side of every hello
  std::string address_;    // "host:port", as published
  auth::Nonce challenge_;  // published with it (src/net/peer_auth.h)
  std::unique_ptr<Peer[]> peers_;
  bool closed_ = false;
  // closing() was called (by the closing thread; connect() reads it on the engine thread): a
  // peer that refuses connections has left.
  std::atomic<bool> leaving_{false};

  std::mutex mu_;     // guards what sleep() reads: the fields marked above, and:
  net::Fd listener_;  // invalid after close()
  net::Fd wake_fd_;   // eventfd (never changes)
  std::vector<Pending> pending_;
  int sleepers_ = 0;
  std::vector<net::Fd> graveyard_;         // dropped while a sleep() ran
  Clock::time_point last_refusal_note_{};  // note_refusal's rate limit
  int64_t unnoted_refusals_ = 0;
};

}  // namespace lockstep::p2p
