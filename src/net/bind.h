// Where a listener binds. Every lockstep listener (the store, the tcp and hier mesh) binds the
// address it advertises, so that a job told to use 127.0.0.1 listens on loopback alone and a node's
// listeners are reachable only through the interface peers are told about (torch's TCPStore listens
// on every interface even then: pytorch/pytorch#173909). LOCKSTEP_BIND_ADDR (or `lockstep run
// --bind-addr`) overrides; an advertised name this host cannot bind (a NAT address, a name of
// another host) falls back to every interface, said once at INFO.
#pragma once

#include <cstdint>
#include <string>

#include "net/socket.h"

namespace lockstep::net {

// The address to bind for a listener that advertises `advertised`: the override when set
// (`override_address`, else LOCKSTEP_BIND_ADDR), else `advertised` when this host has that
// address, else every interface ("0.0.0.0"; "::" for an IPv6 literal). `what` names the listener in
// the INFO line of a fallback.
std::string bind_address_for(const std::string& advertised, const std::string& what,
                             const std::string& override_address = "");

// Whether this host can bind `host` (it resolves to an address of one of its interfaces).
bool is_local_address(const std::string& host);

// listen_tcp(bind_address_for(advertised, what), port).
Fd listen_where_advertised(const std::string& advertised, uint16_t port, const std::string& what);

}  // namespace lockstep::net
