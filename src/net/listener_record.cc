#include "net/listener_record.h"

#include <unistd.h>

#include <charconv>
#include <string_view>

#include "lockstep/core/error.h"

namespace lockstep::net {

namespace {

const char* key_part(Service service) {
  return service == Service::mesh ? "mesh" : "p2p";
}

// The fields of "a|b|c|d", or false when there are not exactly four.
bool split4(std::string_view text, std::string_view (&out)[4]) {
  for (int i = 0; i < 3; ++i) {
    const size_t bar = text.find('|');
    if (bar == std::string_view::npos) return false;
    out[i] = text.substr(0, bar);
    text.remove_prefix(bar + 1);
  }
  out[3] = text;
  return out[3].find('|') == std::string_view::npos;
}

template <class T>
bool parse_number(std::string_view text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string listener_key(const std::string& group, Service service, int rank) {
  return detail::concat(group, "/net/", key_part(service), "/", rank);
}

std::string format_listener_record(const std::string& advertised, uint16_t port,
                                   const std::string& hostname, const auth::Nonce& challenge) {
  const bool v6 = advertised.find(':') != std::string::npos;
  return detail::concat(v6 ? "[" + advertised + "]" : advertised, ":", port, "|", hostname, "|",
                        ::getpid(), "|", auth::to_hex(challenge));
}

ListenerRecord parse_listener_record(const std::string& record, int rank) {
  ListenerRecord r;
  std::string_view fields[4];
  bool ok = split4(record, fields);
  const size_t colon = ok ? fields[0].rfind(':') : std::string_view::npos;
  ok = ok && colon != std::string_view::npos && colon > 0 &&
       parse_number(fields[0].substr(colon + 1), r.port) && r.port != 0 &&
       parse_number(fields[2], r.pid) && auth::from_hex(fields[3], r.challenge);
  LOCKSTEP_ENFORCE(ok, NetworkError, "rank ", rank, " published a malformed address '", record,
                   "' (another program using the same store keys, or another lockstep version?)");
  r.address = std::string(fields[0]);
  std::string_view host = fields[0].substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  r.host = std::string(host);
  r.hostname = std::string(fields[1]);
  return r;
}

}  // namespace lockstep::net
