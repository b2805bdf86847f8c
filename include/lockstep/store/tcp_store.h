// TcpStore: a Store served over TCP by one process to any number of clients.
//
// Protocol: a client opens with a magic number and a protocol version; the server drops any
// connection whose first bytes are not that handshake (a port scanner, a stray HTTP client)
// without disturbing others. With a job secret (the usual case under `lockstep run`), client and
// server then prove to each other that they know it before any key is read or written. Every
// request and reply is length-prefixed, and lengths are bounded (kMaxKeyBytes, kMaxValueBytes), so
// a malformed message cannot make the server allocate gigabytes: the offending connection is
// dropped instead. A connection that does not finish its handshake in time, or sends a request (or
// takes a reply) too slowly, is dropped too, and one short of file descriptors makes room by
// dropping unauthenticated connections, so thousands of idle or crawling clients cannot stop the
// job's rendezvous (docs/security.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/store/store.h"

namespace lockstep {

// The job's secret from the environment: LOCKSTEP_SECRET, else the contents of the file that
// LOCKSTEP_SECRET_FILE names; "" when neither is set (ConfigError when the file is unreadable).
// `lockstep run` sets LOCKSTEP_SECRET for its ranks.
std::string job_secret_from_environment();

struct TcpStoreServerOptions {
  std::string bind_host = "0.0.0.0";  // "0.0.0.0" (all interfaces), "127.0.0.1", or "::"
  uint16_t port = 0;                  // 0: the kernel picks a free port (see port())
  // Clients must prove they know this secret (HMAC-SHA256 challenge-response; it never crosses
  // the wire). "": no authentication, and anyone who reaches the port can read and write keys.
  std::string secret = job_secret_from_environment();
};

// The server: owns a thread that serves every client until destruction. Construction binds and
// listens, so clients may connect as soon as it returns. A port already in use throws
// NetworkError naming the port and suggesting --master-port or 0.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(const TcpStoreServerOptions& options);
  ~TcpStoreServer();  // stops the thread and closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreOptions {
  std::string host = "127.0.0.1";  // the server's address or hostname
  uint16_t port = 0;               // the server's port (with is_server: 0 picks a free one)
  bool is_server = false;          // also start a TcpStoreServer in this process
  // Deadline for the first connection (retried with backoff, progress logged) and default
  // timeout of every call.
  std::chrono::milliseconds timeout{300'000};
  // The job's secret: the client and the server each prove they know it, and a server whose
  // secret differs, or that has one when this client has none (or none when it has one), is an
  // AuthError. Also the secret of the server that is_server starts.
  std::string secret = job_secret_from_environment();
};

// A client connection, optionally owning the server. Safe to use from several threads (calls are
// serialised on the one connection). If the server goes away, calls throw NetworkError naming the
// server's address.
class TcpStore : public Store {
 public:
  // Connects (after starting the server when is_server). A server that cannot be reached by the
  // deadline throws TimeoutError naming host:port and the last socket error.
  explicit TcpStore(const TcpStoreOptions& options);
  ~TcpStore() override;
  void set(const std::string& key, std::string_view value) override;
  std::string get(const std::string& key,
                  std::chrono::milliseconds timeout = kDefaultTimeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, std::string_view expected,
                          std::string_view desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout = kDefaultTimeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout = kDefaultTimeout) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override;

  // The server's port (useful with is_server and port 0).
  uint16_t port() const;
  // The local IP address of this client's connection: the address through which this host
  // reaches the server, and so a good address to advertise to peers.
  std::string local_address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
