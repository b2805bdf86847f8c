// A TcpStore server in a child process of its own (this test binary re-run in child mode), for
// the tests and figures that need the server's own measures: its peak memory and CPU time, and
// its behaviour under a low limit on open files, which a test must not impose on itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace lockstep::store_test {

// What the server process reports as it exits.
struct ServerReport {
  long peak_rss_kib = -1;  // VmHWM
  long cpu_ms = -1;        // user + system time of the whole process
  long wall_ms = -1;       // from the server's start to its stop
  std::string output;      // everything it wrote (its log lines included)
};

class ServerChild {
 public:
  // Starts the server (secret kAbuseSecret) and waits until it listens. fd_limit > 0: the child
  // first lowers its own limit on open files (soft and hard) to fd_limit.
  explicit ServerChild(long fd_limit = 0);
  ~ServerChild();
  uint16_t port() const { return port_; }
  int pid() const;
  // Asks the server to stop and returns its report.
  ServerReport stop();

 private:
  testing::TempDir dir_;
  std::unique_ptr<testing::Child> child_;
  uint16_t port_ = 0;
};

}  // namespace lockstep::store_test
