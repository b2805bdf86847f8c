#include "net/bind.h"

#include <netdb.h>
#include <sys/socket.h>

#include "core/log.h"
#include "lockstep/core/settings.h"

namespace lockstep::net {

bool is_local_address(const std::string& host) {
  if (host.empty()) return false;
  std::string name = host;
  if (name.size() > 2 && name.front() == '[') name = name.substr(1, name.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(name.c_str(), "0", &hints, &list) != 0) return false;
  bool local = false;
  for (addrinfo* a = list; a && !local; a = a->ai_next) {
    Fd probe(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    local = probe.valid() && ::bind(probe.get(), a->ai_addr, a->ai_addrlen) == 0;
  }
  ::freeaddrinfo(list);
  return local;
}

std::string bind_address_for(const std::string& advertised, const std::string& what,
                             const std::string& override_address) {
  if (!override_address.empty()) return override_address;
  if (!settings().bind_addr.empty()) return settings().bind_addr;
  std::string host = advertised;
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (is_local_address(host)) return host;
  const bool v6 = host.find(':') != std::string::npos;
  log_info(what, ": this host cannot bind its advertised address '", advertised,
           "'; listening on every interface (set LOCKSTEP_BIND_ADDR to choose one)");
  return v6 ? "::" : "0.0.0.0";
}

Fd listen_where_advertised(const std::string& advertised, uint16_t port, const std::string& what) {
  return listen_tcp(bind_address_for(advertised, what), port);
}

}  // namespace lockstep::net
