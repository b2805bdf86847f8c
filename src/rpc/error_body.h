// What an error frame says: why the callee did not answer a call with a value. The caller turns
// it into the RpcError that names the call and the worker (to_exception).
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "lockstep/rpc/rpc.h"
#include "rpc/message.h"

namespace lockstep::rpc {

enum class ErrorCode : uint8_t {
  remote_exception = 1,  // the function threw: type, message, traceback
  unknown_function = 2,  // no such function: registered lists the callee's
  unknown_object = 3,    // no such served object, or it was closed (message says which)
  malformed = 4,         // the callee could not read the call
  shutting_down = 5,     // the callee is closing and takes no new calls
};

struct ErrorBody {
  ErrorCode code = ErrorCode::remote_exception;
  std::string type;                     // remote_exception: the exception's type ("ValueError")
  std::string message;                  // its text, or what was not found
  std::string traceback;                // the callee's traceback (Python), "" for C++
  std::vector<std::string> registered;  // unknown_*: what the callee has
};

Message encode_error(const ErrorBody& body);
// CodecError when the body is not an error body.
ErrorBody decode_error(const Message& message);

// The exception a caller raises for `body`, from `worker`, for a call described by `what`
// ("rpc_sync('worker1', 'add')").
std::exception_ptr to_exception(const ErrorBody& body, const WorkerInfo& worker,
                                const std::string& what);

// "add, get_params, opt.step": a list of names for messages, at most `max` of them.
std::string name_list(const std::vector<std::string>& names, size_t max = 20);

}  // namespace lockstep::rpc
