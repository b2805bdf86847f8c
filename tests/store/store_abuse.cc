#include "store_abuse.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/auth.h"
#include "store_test_util.h"
#include "support/spawn.h"

namespace lockstep::store_test {

milliseconds run_rendezvous(uint16_t port, int ranks, const std::string& secret,
                            milliseconds timeout) {
  // Each rendezvous on a server uses keys of its own, so one server can host several.
  static std::atomic<int> rounds{0};
  const std::string prefix = "rendezvous" + std::to_string(rounds++) + "/";
  std::vector<std::string> keys;
  for (int r = 0; r < ranks; ++r) keys.push_back(prefix + "rank" + std::to_string(r));
  const auto t0 = Clock::now();
  testing::spawn(ranks, [&](int rank) {
    TcpStore store({.port = port, .timeout = timeout, .secret = secret});
    // Counted before its key appears: once every key is there, every rank has been counted.
    store.add(prefix + "joined", 1);
    store.set(keys[rank], "address of rank " + std::to_string(rank));
    store.wait(keys, timeout);
    auto values = store.multi_get(keys, timeout);
    for (int r = 0; r < ranks; ++r)
      LOCKSTEP_ENFORCE(values[r] == "address of rank " + std::to_string(r), StoreError,
                       "rendezvous: rank ", rank, " read '", values[r], "' for rank ", r);
    const int64_t joined = store.add(prefix + "joined", 0);
    LOCKSTEP_ENFORCE(joined == ranks, StoreError, "rendezvous: ", joined, " of ", ranks,
                     " ranks joined");
  });
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
}

std::string hello_bytes() {
  return "LKST" + le(2, 4) + std::string(32, '\x5a');
}

std::optional<net::Fd> try_authenticate(uint16_t port, const std::string& secret,
                                        milliseconds within) {
  auto fd = raw_connect(port);
  auth::Nonce mine = auth::make_nonce();
  raw_send(fd.get(), "LKST" + le(2, 4) + std::string(mine.begin(), mine.end()));
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(within.count())) != 1) return std::nullopt;
  const std::string hello = raw_read(fd.get(), 8 + 4 + 32 + 32);
  LOCKSTEP_ENFORCE(hello.substr(0, 4) == "LKST", NetworkError, "not a lockstep store server");
  auth::Nonce theirs;
  std::copy(hello.begin() + 12, hello.begin() + 44, theirs.begin());
  auth::Proof proof{};
  if (!secret.empty()) proof = auth::prove(secret, auth::Role::client, theirs, mine);
  raw_send(fd.get(), std::string(proof.begin(), proof.end()));
  return fd;
}

net::Fd raw_authenticated(uint16_t port, const std::string& secret) {
  std::optional<net::Fd> fd = try_authenticate(port, secret, milliseconds(5'000));
  LOCKSTEP_ENFORCE(fd.has_value(), TimeoutError, "the store server did not answer a hello in 5 s");
  return std::move(*fd);
}

void raw_round_trip(int fd) {
  constexpr char kNumKeys = 8;
  raw_send(fd, std::string(1, kNumKeys) + le(0, 8) + le(0, 4));
  raw_read(fd, 1 + 8 + 4);
}

std::string set_announcing(const std::string& key, uint64_t value_bytes) {
  constexpr char kSet = 1;
  return std::string(1, kSet) + le(0, 8) + le(2, 4) + le(key.size(), 8) + key + le(value_bytes, 8);
}

std::vector<net::Fd> open_idle_connections(uint16_t port, int n, size_t partial_hello,
                                           Deadline deadline, std::atomic<int>* opened) {
  std::vector<net::Fd> fds;
  fds.reserve(n);
  const std::string hello = hello_bytes().substr(0, partial_hello);
  // One connection at a time (on loopback each takes microseconds): a burst of thousands of
  // non-blocking connects would overflow the listen backlog and then wait out SYN retries.
  while (static_cast<int>(fds.size()) < n) {
    net::Fd fd;
    int err = net::connect_tcp_once("127.0.0.1", port, deadline, fd);
    LOCKSTEP_ENFORCE(err == 0, NetworkError, "abuser: connection ", fds.size(),
                     " failed: ", net::errno_text(err));
    if (fds.size() % 2 == 1 && !hello.empty())
      ::send(fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL);
    fds.push_back(std::move(fd));
    if (opened) ++*opened;
  }
  return fds;
}

SlowSender::SlowSender(net::Fd fd, std::string bytes, milliseconds interval)
    : fd_(std::move(fd)), bytes_(std::move(bytes)), start_(Clock::now()) {
  thread_ = std::thread([this, interval] { run(interval); });
}

SlowSender::~SlowSender() {
  stop_ = true;
  thread_.join();
}

void SlowSender::run(milliseconds interval) {
  for (size_t i = 0; i < bytes_.size() && !stop_; ++i) {
    if (::send(fd_.get(), &bytes_[i], 1, MSG_NOSIGNAL) != 1) break;  // closed under it
    ++sent_;
    // Until the next byte is due, watch for the server closing the connection.
    const auto next = Clock::now() + interval;
    while (!stop_ && Clock::now() < next) {
      if (closed_by_peer(fd_.get(), milliseconds(50))) {
        dropped_ms_ = ms_since(start_);
        return;
      }
    }
  }
  while (!stop_) {  // out of bytes: keep watching
    if (closed_by_peer(fd_.get(), milliseconds(50))) {
      dropped_ms_ = ms_since(start_);
      return;
    }
  }
}

std::optional<milliseconds> SlowSender::dropped_after(milliseconds within) {
  auto deadline = Clock::now() + within;
  while (dropped_ms_ < 0 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
  if (dropped_ms_ < 0) return std::nullopt;
  return milliseconds(dropped_ms_.load());
}

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

long status_kib(const char* field, int pid) {
  std::ifstream status(pid == 0 ? std::string("/proc/self/status")
                                : "/proc/" + std::to_string(pid) + "/status");
  const std::string prefix = std::string(field) + ":";
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  return -1;
}

long cpu_ms_of(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may hold spaces: state is the
  // 3rd field, utime and stime the 14th and 15th.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  long utime = -1, stime = -1;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  if (utime < 0 || stime < 0) return -1;
  return (utime + stime) * 1000 / ::sysconf(_SC_CLK_TCK);
}

}  // namespace lockstep::store_test
