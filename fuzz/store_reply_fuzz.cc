// A TcpStore client's side of a connection (src/store/client_connection.cc, tcp_store.cc):
// replies from the server, parsed a read at a time (store_proto::MessageParser), each then
// checked as the call that waits for it checks it (store_detail::checked_reply).
//
// Input: a byte for the read size, then the server's byte stream after its hello (the hello is
// store_auth_fuzz's). Each reply answers the next call of a fixed cycle of every store call.
// Checked: the parser's errors have reasons, a reply survives encode and parse unchanged, and a
// bad reply is a lockstep error, never anything else.
#include <algorithm>

#include "fuzz_input.h"
#include "lockstep/core/error.h"
#include "store/protocol.h"
#include "store/reply_check.h"

namespace {

namespace sp = lockstep::store_proto;
using lockstep::fuzz::broken;

// Each store call and the string count of its reply (tcp_store.cc).
struct Call {
  const char* op;
  size_t strings;
};
constexpr Call kCalls[] = {{"set", 0},       {"get", 1},      {"add", 0},        {"compare_set", 1},
                           {"check", 0},     {"wait", 0},     {"delete_key", 0}, {"num_keys", 0},
                           {"multi_get", 3}, {"multi_set", 0}};

void check_round_trip(const sp::Message& m) {
  std::string bytes;
  sp::encode(m, bytes);
  sp::MessageParser parser(sp::Direction::reply);
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  if (parser.feed(&p, end) != sp::MessageParser::Result::complete || p != end)
    broken("an encoded reply does not parse back: " + parser.error());
  const sp::Message again = parser.take();
  if (again.code != m.code || again.number != m.number || again.strings != m.strings)
    broken("a reply changed through encode and parse");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = lockstep::fuzz::read_size(data[0]);
  const std::string_view stream = lockstep::fuzz::as_text(data + 1, size - 1);
  sp::MessageParser parser(sp::Direction::reply);
  size_t calls = 0;
  for (size_t at = 0; at < stream.size();) {
    const size_t n = step == 0 ? stream.size() - at : std::min(step, stream.size() - at);
    const char* p = stream.data() + at;
    const char* end = p + n;
    at += n;
    while (p < end) {  // ClientConnection::call and parse
      const auto result = parser.feed(&p, end);
      if (result == sp::MessageParser::Result::invalid) {
        if (parser.error().empty()) broken("an invalid reply without a reason");
        return 0;  // the connection is broken for good
      }
      if (result != sp::MessageParser::Result::complete) continue;
      sp::Message reply = parser.take();
      check_round_trip(reply);
      const Call& call = kCalls[calls++ % std::size(kCalls)];
      try {
        lockstep::store_detail::checked_reply(call.op, std::move(reply), call.strings,
                                              "lockstep store server at fuzz:1");
      } catch (const lockstep::Error&) {
        // A clear error for the caller; the connection stays in step.
      }
    }
  }
  return 0;
}
