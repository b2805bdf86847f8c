// Abusive clients of the TcpStore server, and the small rendezvous of real ranks that they must
// not stop: the shared pieces of the resource-limit tests (tcp_store_flood_test.cc,
// tcp_store_fd_limit_test.cc, tcp_store_slowloris_test.cc, tcp_store_huge_value_test.cc) and of
// their figures (tcp_store_abuse_figures_test.cc). Every abuser speaks raw bytes, as a hostile or
// broken client would, never through TcpStore.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/core/deadline.h"
#include "net/socket.h"

namespace lockstep::store_test {

// The secret of the servers in these tests: the usual case under `lockstep run`, where only a
// client that proves it may send requests.
inline constexpr const char* kAbuseSecret = "resource limits test secret";

// The rendezvous of `ranks` real clients, one thread each, as ranks do at start-up: each sets its
// own key, adds itself to a counter, waits for every rank's key and reads them all, and checks
// the counter. Returns its wall time; throws (the first rank's error) when it fails or a call
// exceeds `timeout`.
milliseconds run_rendezvous(uint16_t port, int ranks, const std::string& secret,
                            milliseconds timeout);

// Client side of a raw connection: the hello (prefix and nonce), and the full handshake of a
// client that knows `secret` ("" for none), after which requests may follow.
std::string hello_bytes();
net::Fd raw_authenticated(uint16_t port, const std::string& secret);
// The same, but nullopt when the server has not answered the hello within `within` (it has not
// accepted the connection: out of file descriptors).
std::optional<net::Fd> try_authenticate(uint16_t port, const std::string& secret,
                                        milliseconds within);
// One request and its reply on a raw connection that finished its handshake (num_keys): once it
// returns, the server has taken the connection's proof. NetworkError when it gets no reply.
void raw_round_trip(int fd);
// A set request's first bytes: its header, the key, then a value length of `value_bytes`
// (no value bytes follow).
std::string set_announcing(const std::string& key, uint64_t value_bytes);

// Opens n connections to 127.0.0.1:port, one after another, and sends the first `partial_hello`
// bytes of a hello on every other one (the rest send nothing). Counts them in *opened as they open,
// when given. Throws when one cannot connect by the deadline.
std::vector<net::Fd> open_idle_connections(uint16_t port, int n, size_t partial_hello,
                                           Deadline deadline, std::atomic<int>* opened = nullptr);

// A slowloris: a thread that sends `bytes`, one byte every `interval`, on fd, and notes when the
// server closes the connection. Stops at the close, when the bytes run out, or at destruction.
class SlowSender {
 public:
  SlowSender(net::Fd fd, std::string bytes, milliseconds interval);
  ~SlowSender();
  SlowSender(const SlowSender&) = delete;
  SlowSender& operator=(const SlowSender&) = delete;
  // Waits up to `within` for the server to close the connection; how long after the start it
  // did, or nullopt when it still holds it.
  std::optional<milliseconds> dropped_after(milliseconds within);
  // Bytes sent so far.
  size_t sent() const { return sent_.load(); }

 private:
  void run(milliseconds interval);

  net::Fd fd_;
  std::string bytes_;
  Clock::time_point start_;
  std::atomic<size_t> sent_{0};
  std::atomic<int64_t> dropped_ms_{-1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The file descriptors this process has open (the entries of /proc/self/fd).
int open_fds();
// A field of /proc/<pid>/status in KiB ("VmHWM", "VmRSS"; pid 0: this process); -1 if absent.
long status_kib(const char* field, int pid = 0);
// The CPU time (user + system) process pid has used so far, in ms; -1 if unknown.
long cpu_ms_of(int pid);

}  // namespace lockstep::store_test
