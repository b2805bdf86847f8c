// The data plane's opening (src/net/hello.h, src/net/listener_record.h): the hello a listener
// reads off a fresh connection, judged by hello_problem before anything else is read, and the
// listener record a connector reads from the store, parsed by parse_listener_record.
//
// Input: the hello's bytes as they come off the socket, then the record's text.
// Checked: a record the parser accepts has a port and round-trips through format_listener_record
// (the same fields come back), and a hello hello_problem accepts claims a rank inside the group.
#include <cstring>
#include <string>

#include "fuzz_input.h"
#include "lockstep/core/error.h"
#include "net/hello.h"
#include "net/listener_record.h"

using namespace lockstep;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  net::Hello h;
  const size_t hello_bytes = size < sizeof h ? size : sizeof h;
  std::memcpy(&h, data, hello_bytes);
  const net::Endpoint me{.service = net::Service::p2p, .group = "g", .size = 4, .rank = 0};
  if (net::hello_problem(h, me).empty()) {
    if (h.rank < 0 || h.rank >= me.size)
      fuzz::broken(detail::concat("hello_problem passed a hello claiming rank ", h.rank));
    (void)net::host_of(h);
  }
  const std::string record(reinterpret_cast<const char*>(data) + hello_bytes, size - hello_bytes);
  try {
    const net::ListenerRecord r = net::parse_listener_record(record, 1);
    if (r.port == 0) fuzz::broken("parse_listener_record passed port 0 in '" + record + "'");
    const std::string again = net::format_listener_record(r.host, r.port, r.hostname, r.challenge);
    const net::ListenerRecord back = net::parse_listener_record(again, 1);
    if (back.host != r.host || back.port != r.port || back.hostname != r.hostname ||
        back.challenge != r.challenge)
      fuzz::broken("the record '" + record + "' did not survive format and parse ('" + again +
                   "')");
  } catch (const NetworkError&) {
  }
  return 0;
}
