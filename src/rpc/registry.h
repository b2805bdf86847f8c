// What a worker serves: functions by name and objects' methods, each a Handler that answers a
// request through its Responder (once). The C++ Function types of rpc.h and Python's callables
// (src/c10d/rpc_module.cc) become Handlers; nothing else runs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "lockstep/rpc/rpc.h"
#include "rpc/error_body.h"
#include "rpc/message.h"

namespace lockstep::rpc {

// A request as a handler sees it: who sent it, and its message, whose arguments (a tuple, then a
// dict) start at args_offset of the body.
struct Request {
  const WorkerInfo& caller;
  const Message& message;
  size_t args_offset;
};

// Answers one call. The first answer is sent; later ones are ignored. A Responder that is
// destroyed unanswered (an async function's future dropped) answers with an error.
class Responder {
 public:
  virtual ~Responder() = default;
  void reply(Message result);
  void error(ErrorBody body);
  bool answered() const { return answered_; }

 protected:
  virtual void send(bool ok, Message message) = 0;
  void mark_answered() { answered_ = true; }

 private:
  bool answered_ = false;
  std::mutex mu_;
};
using ResponderPtr = std::shared_ptr<Responder>;

using Handler = std::function<void(const Request&, const ResponderPtr&)>;

class Registry {
 public:
  void add_function(const std::string& name, Handler handler);
  void remove_function(const std::string& name);
  void add_object(const std::string& name, std::map<std::string, Handler> methods);
  void close_object(const std::string& name);

  // The handler for a request's target (`object` null for a function); null with `missing`
  // filled when there is none.
  Handler find(const std::string& target, const std::string* object, ErrorBody& missing) const;
  std::vector<std::string> function_names() const;
  // Everything callable, for UnknownFunction's list: functions, then "object.method".
  std::vector<std::string> callable_names() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, Handler> functions_;
  std::map<std::string, std::map<std::string, Handler>> objects_;
  std::set<std::string> closed_;
};

// The process's registry: what rpc::register_function adds, what init_rpc's agent serves.
const std::shared_ptr<Registry>& process_registry();

// C++ functions as handlers: the arguments decoded into a Call, the result encoded; an
// exception becomes a remote_exception naming its type.
Handler function_handler(Function fn);
Handler async_function_handler(AsyncFunction fn);

// Checks a function or object name: 1 to 256 bytes of UTF-8 text without control characters.
void check_callable_name(const std::string& name, const char* what);

}  // namespace lockstep::rpc
