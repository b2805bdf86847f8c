#include "rpc/registry.h"

#include <cxxabi.h>

#include <cstdlib>
#include <optional>
#include <typeinfo>

#include "lockstep/core/error.h"
#include "rpc/codec.h"
#include "rpc/future_state.h"

namespace lockstep::rpc {

void Responder::reply(Message result) {
  {
    std::lock_guard lock(mu_);
    if (answered_) return;
    answered_ = true;
  }
  send(true, std::move(result));
}

void Responder::error(ErrorBody body) {
  {
    std::lock_guard lock(mu_);
    if (answered_) return;
    answered_ = true;
  }
  send(false, encode_error(body));
}

void check_callable_name(const std::string& name, const char* what) {
  bool ok = !name.empty() && name.size() <= 256 && is_utf8(name);
  for (unsigned char c : name) ok = ok && c >= 0x20 && c != 0x7f;
  LOCKSTEP_ENFORCE(ok, InvalidArgument, "rpc: ", what, " name '", name,
                   "' must be 1 to 256 characters of printable UTF-8 text");
}

void Registry::add_function(const std::string& name, Handler handler) {
  check_callable_name(name, "function");
  std::unique_lock lock(mu_);
  LOCKSTEP_ENFORCE(!functions_.count(name), InvalidArgument, "rpc: a function named '", name,
                   "' is already registered here (unregister it first)");
  functions_.emplace(name, std::move(handler));
}

void Registry::remove_function(const std::string& name) {
  std::unique_lock lock(mu_);
  functions_.erase(name);
}

void Registry::add_object(const std::string& name, std::map<std::string, Handler> methods) {
  check_callable_name(name, "served object");
  for (const auto& [method, h] : methods) check_callable_name(method, "method");
  LOCKSTEP_ENFORCE(!methods.empty(), InvalidArgument, "rpc: serve('", name,
                   "') names no methods; list the methods callers may call");
  std::unique_lock lock(mu_);
  LOCKSTEP_ENFORCE(!objects_.count(name), InvalidArgument, "rpc: an object named '", name,
                   "' is already served here (close it first)");
  closed_.erase(name);
  objects_.emplace(name, std::move(methods));
}

void Registry::close_object(const std::string& name) {
  std::unique_lock lock(mu_);
  if (objects_.erase(name)) closed_.insert(name);
}

Handler Registry::find(const std::string& target, const std::string* object,
                       ErrorBody& missing) const {
  std::shared_lock lock(mu_);
  if (!object) {
    auto it = functions_.find(target);
    if (it != functions_.end()) return it->second;
    missing.code = ErrorCode::unknown_function;
    missing.type = target;
    missing.message = detail::concat("has no function '", target, "'");
  } else {
    auto it = objects_.find(*object);
    if (it != objects_.end()) {
      auto m = it->second.find(target);
      if (m != it->second.end()) return m->second;
      missing.code = ErrorCode::unknown_object;
      missing.type = *object + "." + target;
      missing.message = detail::concat("serves '", *object, "' without a method '", target, "'");
    } else {
      missing.code = ErrorCode::unknown_object;
      missing.type = *object + "." + target;
      missing.message = closed_.count(*object) ? detail::concat("closed its object '", *object, "'")
                                               : detail::concat("serves no object '", *object, "'");
    }
  }
  lock.unlock();
  missing.registered = callable_names();
  return nullptr;
}

std::vector<std::string> Registry::function_names() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, h] : functions_) names.push_back(name);
  return names;
}

std::vector<std::string> Registry::callable_names() const {
  std::vector<std::string> names = function_names();
  std::shared_lock lock(mu_);
  for (const auto& [object, methods] : objects_)
    for (const auto& [method, h] : methods) names.push_back(object + "." + method);
  return names;
}

const std::shared_ptr<Registry>& process_registry() {
  static const auto* registry = new std::shared_ptr<Registry>(std::make_shared<Registry>());
  return *registry;
}

namespace {

std::string demangled(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string s = status == 0 && name ? name : type.name();
  std::free(name);
  return s;
}

// The current exception as a remote_exception.
ErrorBody current_exception_body() {
  ErrorBody b;
  try {
    throw;
  } catch (const std::exception& e) {
    b.type = demangled(typeid(e));
    b.message = e.what();
  } catch (...) {
    b.type = "unknown exception";
    b.message = "a C++ exception that is not a std::exception";
  }
  return b;
}

// Decodes the Call of a request: (args tuple, kwargs dict).
Call decode_call(const Request& request) {
  Reader r(request.message, request.args_offset);
  Call call{request.caller, {}, {}};
  Value args = decode(r);
  Value kwargs = decode(r);
  if (args.kind() != Value::Kind::tuple || kwargs.kind() != Value::Kind::dict || !r.at_end())
    r.fail("a request's arguments are a tuple and a dict");
  call.args = std::move(const_cast<Tuple&>(args.as_tuple()).items);
  call.kwargs = std::move(const_cast<Dict&>(kwargs.as_dict()));
  return call;
}

// Decodes the call into `call`; false, having answered "malformed", when it cannot.
bool decode_or_refuse(const Request& request, const ResponderPtr& responder,
                      std::optional<Call>& call) {
  try {
    call.emplace(decode_call(request));
    return true;
  } catch (const CodecError& e) {
    responder->error({.code = ErrorCode::malformed, .message = e.what()});
    return false;
  }
}

void answer_with(const ResponderPtr& responder, const Value& value) {
  Message m;
  try {
    encode(value, m);
  } catch (...) {
    responder->error(current_exception_body());
    return;
  }
  responder->reply(std::move(m));
}

}  // namespace

Handler function_handler(Function fn) {
  return [fn = std::move(fn)](const Request& request, const ResponderPtr& responder) {
    std::optional<Call> call;
    if (!decode_or_refuse(request, responder, call)) return;
    Value result;
    try {
      result = fn(*call);
    } catch (...) {
      responder->error(current_exception_body());
      return;
    }
    answer_with(responder, result);
  };
}

Handler async_function_handler(AsyncFunction fn) {
  return [fn = std::move(fn)](const Request& request, const ResponderPtr& responder) {
    std::optional<Call> call;
    if (!decode_or_refuse(request, responder, call)) return;
    std::optional<Future> future;
    try {
      future = fn(*call);
    } catch (...) {
      responder->error(current_exception_body());
      return;
    }
    future->then([responder](const Future& done) {
      Value v;
      try {
        v = done.wait();
      } catch (...) {
        responder->error(current_exception_body());
        return;
      }
      answer_with(responder, v);
    });
  };
}

}  // namespace lockstep::rpc
