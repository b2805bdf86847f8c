// Thin RAII helpers over BSD sockets, shared by the TCP store and the TCP backend.
// Every blocking helper takes a Deadline; errors name the address and the errno text.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "lockstep/core/deadline.h"

namespace lockstep::net {

// An owned file descriptor; closes on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Binds and listens on host:port (port 0: any free port). host "" or "0.0.0.0": all IPv4
// interfaces; "::" all interfaces. A port in use throws NetworkError naming it.
Fd listen_tcp(const std::string& host, uint16_t port, int backlog = 128);
// The port a listening or connected socket is bound to.
uint16_t local_port(int fd);
// The local IP address of a connected socket, as text.
std::string local_address(int fd);
// The local address this host would use to reach host (the routing table's choice, found with an
// unconnected-traffic UDP socket: nothing is sent). Throws NetworkError when host cannot be
// resolved or reached.
std::string address_toward(const std::string& host);
// The peer's IP address and port, as "ip:port".
std::string peer_address(int fd);

// Connects to host:port, retrying with exponential backoff (10 ms doubling to 1 s) until the
// deadline; logs progress every few seconds when log_progress. At the deadline throws TimeoutError
// naming host:port and the last socket error.
Fd connect_tcp(const std::string& host, uint16_t port, Deadline deadline, bool log_progress);
// One attempt to connect to host:port (each address it resolves to, in turn), waiting up to the
// deadline: 0 with the blocking socket in `out`, or the errno of the last address tried
// (ECONNREFUSED: nothing listens there). A host that cannot be resolved throws NetworkError.
int connect_tcp_once(const std::string& host, uint16_t port, Deadline deadline, Fd& out);
// Accepts one connection, waiting up to the deadline (TimeoutError).
Fd accept_tcp(int listen_fd, Deadline deadline);

// Sets TCP_NODELAY, unpaced congestion control for a peer on this host (net/congestion.h), and
// the send/receive buffer sizes when > 0. fd is connected.
void tune_tcp(int fd, int buffer_bytes);
// [Link liveness] Part of tune_tcp: with LOCKSTEP_LINK_TIMEOUT = T > 0, keepalive probes after
// T/3 idle, every T/10 (at least 1 s each), and TCP_USER_TIMEOUT T: a connection whose peer host
// acknowledged nothing for about T fails with ETIMEDOUT, whether it was sending or idle. A peer
// process that is slow or stopped is not affected: its kernel acknowledges.
void keep_link_alive(int fd, std::chrono::milliseconds timeout);
// Whether err is how a connection reports a peer host that stopped answering (ETIMEDOUT after
// [Link liveness], EHOSTUNREACH, ENETUNREACH).
bool is_unreachable(int err);
// "nothing sent to it was acknowledged for 10 s (LOCKSTEP_LINK_TIMEOUT): the network between the
// two hosts went down, or its host did (a network partition, a dead host)".
std::string unreachable_text(int err);
void set_nonblocking(int fd, bool on);

// Writes/reads exactly n bytes of a blocking or non-blocking socket, waiting with poll(2) up to the
// deadline. read_full throws NetworkError on EOF ("closed by peer"). `what` names the peer in
// errors.
void write_full(int fd, const void* data, size_t n, Deadline deadline, const std::string& what);
void read_full(int fd, void* data, size_t n, Deadline deadline, const std::string& what);

// This host's name (gethostname).
std::string hostname();
// This machine's identity: the host name plus the kernel's boot id, so that two containers that
// share a host name but not memory are not mistaken for one host.
std::string host_identity();
// Text of errno value e.
std::string errno_text(int e);

}  // namespace lockstep::net
