#include "store/reply_check.h"

#include "lockstep/core/error.h"
#include "store/store_semantics.h"

namespace lockstep::store_detail {

using store_proto::Status;

store_proto::Message checked_reply(const char* op, store_proto::Message reply, size_t strings,
                                   const std::string& where) {
  switch (static_cast<Status>(reply.code)) {
    case Status::ok:
      break;
    case Status::timed_out:
      throw TimeoutError(
          timeout_message(op, reply.strings, std::chrono::milliseconds(reply.number), where));
    case Status::error:
      throw StoreError(reply.strings.empty() ? std::string("store error") : reply.strings[0]);
    default:
      throw NetworkError(
          detail::concat("store ", op, ": ", where, " sent an unknown status ", int(reply.code)));
  }
  LOCKSTEP_ENFORCE(reply.strings.size() == strings, NetworkError, "store ", op, ": ", where,
                   " sent ", reply.strings.size(), " strings, expected ", strings);
  return reply;
}

}  // namespace lockstep::store_detail
