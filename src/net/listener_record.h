// ListenerRecord: where a rank's data-plane listener is. The rank that listens publishes it in the
// job's store; every rank that connects to it reads it there (the tcp mesh, the p2p socket
// channel: one key scheme, one format).
//
// Key: "<group>/net/<service>/<rank>". Value: "<address>:<port>|<host name>|<pid>|<challenge>",
// the address in brackets when it is an IPv6 literal, the challenge a nonce made for this
// listener alone (64 hex digits, src/net/peer_auth.h).
#pragma once

#include <cstdint>
#include <string>

#include "net/hello.h"
#include "net/peer_auth.h"

namespace lockstep::net {

struct ListenerRecord {
  std::string host;  // what to connect to (an IPv6 literal without its brackets)
  uint16_t port = 0;
  std::string address;   // "<address>:<port>", as published
  std::string hostname;  // the listener's host name, for messages
  int pid = 0;
  auth::Nonce challenge{};
};

std::string listener_key(const std::string& group, Service service, int rank);
// The record of a listener on `port`, reached at `advertised` (a host name or an address).
std::string format_listener_record(const std::string& advertised, uint16_t port,
                                   const std::string& hostname, const auth::Nonce& challenge);
// Parses what rank `rank` published; throws NetworkError naming the rank when it is malformed.
ListenerRecord parse_listener_record(const std::string& record, int rank);

}  // namespace lockstep::net
