// The free functions of lockstep/rpc/rpc.h, on the process's agent.
#include <mutex>

#include "lockstep/rpc/rpc.h"
#include "rpc/codec.h"
#include "rpc/process_agent.h"
#include "rpc/registry.h"

namespace lockstep::rpc {

namespace {
std::mutex g_mu;
std::shared_ptr<Agent> g_agent;
}  // namespace

std::shared_ptr<Agent> process_agent() {
  std::lock_guard lock(g_mu);
  if (!g_agent)
    throw RpcError("rpc: this process has no rpc agent: call init_rpc first (or it was shut down)");
  return g_agent;
}

void start_process_agent(const std::string& name, int rank, int world_size,
                         const RpcOptions& options) {
  std::lock_guard lock(g_mu);
  LOCKSTEP_ENFORCE(!g_agent, InvalidArgument, "init_rpc: this process is already worker '",
                   g_agent ? g_agent->self().name : "", "'; call shutdown() first");
  g_agent = Agent::start(name, rank, world_size, options, process_registry());
}

ShutdownReport stop_process_agent(std::chrono::milliseconds timeout) {
  std::shared_ptr<Agent> agent = process_agent();
  ShutdownReport report = agent->shutdown(timeout);
  std::lock_guard lock(g_mu);
  if (g_agent == agent) g_agent.reset();
  return report;
}

Message encode_request(const std::string& target, const std::string* object,
                       std::vector<Value> args, Dict kwargs) {
  Message m = request_head(target, object);
  encode(Value(Tuple{std::move(args)}), m);
  encode(Value(std::move(kwargs)), m);
  return m;
}

void init_rpc(const std::string& name, int rank, int world_size, const RpcOptions& options) {
  start_process_agent(name, rank, world_size, options);
}

WorkerInfo get_worker_info(const std::string& name) {
  auto agent = process_agent();
  return name.empty() ? agent->self() : agent->worker(name);
}

std::vector<WorkerInfo> get_worker_infos() {
  return process_agent()->workers();
}

void register_function(const std::string& name, Function fn) {
  process_registry()->add_function(name, function_handler(std::move(fn)));
}

void register_async_function(const std::string& name, AsyncFunction fn) {
  process_registry()->add_function(name, async_function_handler(std::move(fn)));
}

void unregister_function(const std::string& name) {
  process_registry()->remove_function(name);
}

std::vector<std::string> registered_functions() {
  return process_registry()->function_names();
}

namespace {

// A call of `target` (a method of `object`, or a function when null) on worker `to`, shown in
// errors as `form('to', 'shown')`.
Future call(const std::string& to, const std::string& shown, const std::string& target,
            const std::string* object, std::vector<Value> args, Dict kwargs,
            std::optional<std::chrono::milliseconds> timeout, const char* form, bool sync) {
  auto agent = process_agent();
  return agent->call(agent->worker(to), shown,
                     encode_request(target, object, std::move(args), std::move(kwargs)), timeout,
                     form, sync);
}

}  // namespace

Future rpc_async(const std::string& to, const std::string& function, std::vector<Value> args,
                 Dict kwargs, std::optional<std::chrono::milliseconds> timeout) {
  return call(to, function, function, nullptr, std::move(args), std::move(kwargs), timeout,
              "rpc_async", false);
}

Value rpc_sync(const std::string& to, const std::string& function, std::vector<Value> args,
               Dict kwargs, std::optional<std::chrono::milliseconds> timeout) {
  return call(to, function, function, nullptr, std::move(args), std::move(kwargs), timeout,
              "rpc_sync", true)
      .wait();
}

Served& Served::operator=(Served&& o) noexcept {
  if (this != &o) {
    close();
    name_ = std::move(o.name_);
    closer_ = std::exchange(o.closer_, {});
  }
  return *this;
}

void Served::close() {
  if (auto closer = std::exchange(closer_, {})) closer(name_);
}

Served serve(const std::string& object, std::map<std::string, Function> methods) {
  std::map<std::string, Handler> handlers;
  for (auto& [name, fn] : methods) handlers.emplace(name, function_handler(std::move(fn)));
  process_registry()->add_object(object, std::move(handlers));
  return Served(object, [](const std::string& name) { process_registry()->close_object(name); });
}

Future Handle::call_async(const std::string& method, std::vector<Value> args, Dict kwargs,
                          std::optional<std::chrono::milliseconds> timeout) const {
  return rpc::call(worker_, object_ + "." + method, method, &object_, std::move(args),
                   std::move(kwargs), timeout, "handle.call_async", false);
}

Value Handle::call(const std::string& method, std::vector<Value> args, Dict kwargs,
                   std::optional<std::chrono::milliseconds> timeout) const {
  return rpc::call(worker_, object_ + "." + method, method, &object_, std::move(args),
                   std::move(kwargs), timeout, "handle.call", true)
      .wait();
}

Handle handle(const std::string& worker, const std::string& object) {
  return Handle(worker, object);
}

ShutdownReport shutdown(std::chrono::milliseconds timeout) {
  return stop_process_agent(timeout);
}

}  // namespace lockstep::rpc
