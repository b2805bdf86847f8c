#include "net/congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>
#include <string_view>

namespace lockstep::net {

namespace {

constexpr size_t kNameMax = 16;  // the kernel's TCP_CA_NAME_MAX

bool is_loopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    return (ntohl(v4.sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (IN6_IS_ADDR_LOOPBACK(&v6.sin6_addr)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr) && v6.sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  if (a.ss_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

// Whether the peer of fd is a process of this host.
bool peer_is_local(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
    return false;
  return is_loopback(peer) || same_address(local, peer);
}

bool set_congestion(int fd, std::string_view name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                      static_cast<socklen_t>(name.size())) == 0;
}

}  // namespace

void unpace_local_connection(int fd) {
  char current[kNameMax] = {};
  socklen_t len = sizeof(current);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, current, &len) != 0) return;
  if (std::string_view(current, strnlen(current, sizeof(current))).substr(0, 3) != "bbr") return;
  if (!peer_is_local(fd)) return;
  if (!set_congestion(fd, "cubic")) set_congestion(fd, "reno");
}

}  // namespace lockstep::net
