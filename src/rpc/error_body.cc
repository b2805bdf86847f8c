#include "rpc/error_body.h"

#include "rpc/codec.h"

namespace lockstep::rpc {

Message encode_error(const ErrorBody& body) {
  Message m;
  Writer w(m);
  w.tuple(5);
  w.integer(static_cast<int64_t>(body.code));
  for (const std::string* s : {&body.type, &body.message, &body.traceback})
    w.str(is_utf8(*s) ? std::string_view(*s) : std::string_view("(text that is not UTF-8)"));
  w.list(body.registered.size());
  for (const std::string& name : body.registered) w.str(name);
  return m;
}

ErrorBody decode_error(const Message& message) {
  Reader r(message);
  if (r.tuple() != 5) r.fail("an error body is a tuple of 5");
  ErrorBody b;
  int64_t code = r.integer();
  if (code < 1 || code > 5) r.fail(detail::concat("unknown error code ", code));
  b.code = static_cast<ErrorCode>(code);
  b.type = r.str();
  b.message = r.str();
  b.traceback = r.str();
  size_t n = r.list();
  for (size_t i = 0; i < n; ++i) b.registered.emplace_back(r.str());
  if (!r.at_end()) r.fail("bytes after the error body");
  return b;
}

std::string name_list(const std::vector<std::string>& names, size_t max) {
  if (names.empty()) return "nothing";
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += detail::concat(" and ", names.size() - max, " more");
  return s;
}

std::exception_ptr to_exception(const ErrorBody& b, const WorkerInfo& worker,
                                const std::string& what) {
  const std::string who = describe(worker);
  switch (b.code) {
    case ErrorCode::remote_exception: {
      std::string text = detail::concat(what, ": it raised ", b.type, " on ", who, ": ", b.message);
      if (!b.traceback.empty()) text += "\n" + worker.name + "'s traceback:\n" + b.traceback;
      return std::make_exception_ptr(
          RemoteError(text, worker.name, b.type, b.message, b.traceback));
    }
    case ErrorCode::unknown_function:
    case ErrorCode::unknown_object:
      return std::make_exception_ptr(UnknownFunction(
          detail::concat(what, ": ", who, " ", b.message, "; it registered ", b.registered.size(),
                         ": ", name_list(b.registered),
                         ". A worker runs only what it registered (rpc.register, rpc.serve)"),
          worker.name, b.type, b.registered));
    case ErrorCode::malformed:
      return std::make_exception_ptr(CodecError(
          detail::concat(what, ": ", who, " could not read the call: ", b.message), worker.name));
    case ErrorCode::shutting_down:
      return std::make_exception_ptr(ShutdownInProgress(
          detail::concat(what, ": ", who, " is shutting down and takes no new calls"),
          worker.name));
  }
  return std::make_exception_ptr(RpcError(what + ": " + b.message, worker.name));
}

}  // namespace lockstep::rpc
