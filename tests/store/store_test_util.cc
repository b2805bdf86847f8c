#include "store_test_util.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace lockstep::store_test {

net::Fd raw_connect(uint16_t port) {
  auto fd = net::connect_tcp("127.0.0.1", port, Deadline::after(milliseconds(5000)), false);
  net::tune_tcp(fd.get(), 0);
  return fd;
}

void raw_send(int fd, std::string_view bytes) {
  net::write_full(fd, bytes.data(), bytes.size(), Deadline::after(milliseconds(5000)), "server");
}

std::string raw_read(int fd, size_t n) {
  std::string out(n, '\0');
  net::read_full(fd, out.data(), n, Deadline::after(milliseconds(5000)), "server");
  return out;
}

bool closed_by_peer(int fd, milliseconds within, size_t* bytes_seen) {
  auto deadline = Deadline::after(within);
  size_t seen = 0;
  bool closed = false;
  while (!closed) {
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc == 0) break;
    if (rc < 0 && errno == EINTR) continue;
    char buf[4096];
    ssize_t r = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0) seen += static_cast<size_t>(r);
    closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
  }
  if (bytes_seen) *bytes_seen = seen;
  return closed;
}

}  // namespace lockstep::store_test
