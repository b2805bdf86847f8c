// What a TcpStore client makes of a reply (store/protocol.h has the format): the status turned
// into the call's result or its exception, and the string count checked, as a pure function of
// the reply, so that a server's answers can be tested and fuzzed without a connection.
#pragma once

#include <cstddef>
#include <string>

#include "store/protocol.h"

namespace lockstep::store_detail {

// Returns `reply` when its status is ok and it carries `strings` strings. Otherwise throws what
// the call `op` throws: TimeoutError (timed out, naming the keys still missing), StoreError (the
// server's error text), NetworkError (an unknown status, or another string count). `where`
// names the server ("lockstep store server at host:port").
store_proto::Message checked_reply(const char* op, store_proto::Message reply, size_t strings,
                                   const std::string& where);

}  // namespace lockstep::store_detail
