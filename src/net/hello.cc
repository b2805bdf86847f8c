#include "net/hello.h"

#include <unistd.h>

#include <cstring>

#include "core/fnv1a.h"
#include "lockstep/core/error.h"

namespace lockstep::net {

const char* service_name(Service service) {
  switch (service) {
    case Service::mesh:
      return "tcp mesh";
    case Service::p2p:
      return "p2p";
    case Service::rpc:
      return "rpc";
  }
  return "unknown service";
}

Hello make_hello(const Endpoint& me) {
  Hello h;
  h.service = me.service;
  h.flags = me.has_secret ? kHasSecret : 0;
  h.group_hash = fnv1a(me.group);
  h.size = me.size;
  h.rank = me.rank;
  h.pid = static_cast<int32_t>(::getpid());
  std::strncpy(h.host, me.host.c_str(), sizeof(h.host) - 1);
  return h;
}

std::string hello_problem(const Hello& h, const Endpoint& me) {
  if (h.magic != kHelloMagic) return "not a lockstep peer (bad magic)";
  if (h.version != kHelloVersion)
    return detail::concat("protocol version ", h.version, " (this is ", kHelloVersion, ")");
  if (h.service != me.service)
    return detail::concat("a connection for another service (", service_name(h.service),
                          ", this listener is for the ", service_name(me.service), ")");
  if (h.group_hash != fnv1a(me.group)) return "a peer of another group";
  if (h.size != me.size)
    return detail::concat("a peer with group size ", h.size, " (this group has ", me.size, ")");
  if (h.rank < 0 || h.rank >= me.size) return detail::concat("claims rank ", h.rank);
  return "";
}

std::string host_of(const Hello& h) {
  return std::string(h.host, strnlen(h.host, sizeof(h.host)));
}

}  // namespace lockstep::net
