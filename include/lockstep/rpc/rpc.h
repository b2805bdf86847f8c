// lockstep::rpc: remote procedure calls between the processes of a job, safe by construction
// (docs/rpc.md). A worker runs only the functions it registered by name; arguments and results are
// Values (value.h), never pickles or code; every connection proves the job's secret; every failure
// is named (errors.h) and no call waits past its timeout.
//
//   rpc::register_function("add", [](const rpc::Call& c) {
//     return rpc::Value(c.args.at(0).as_int() + c.args.at(1).as_int());
//   });
//   rpc::init_rpc("worker" + std::to_string(rank));   // env://, the launcher's store, its secret
//   int64_t three = rpc::rpc_sync("worker1", "add", {1, 2}).as_int();
//   rpc::shutdown();                                  // waits for every worker's calls
//
// The functions here act on this process's agent, which init_rpc starts; an Agent can also be
// made directly (agent.h), several per process, as the tests do.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "lockstep/rpc/value.h"
#include "lockstep/store/store.h"

namespace lockstep::rpc {

namespace internal {
struct FutureState;
}

// A worker of the job: its name and rank (id), with the host and pid it runs as, for messages.
struct WorkerInfo {
  std::string name;
  int id = -1;
  std::string host;
  int pid = 0;
};
// "worker1 (rank 1 on host vm, pid 4711)".
std::string describe(const WorkerInfo& worker);

// What a registered function receives: who called, and the call's arguments.
struct Call {
  const WorkerInfo& caller;
  std::vector<Value> args;
  Dict kwargs;
};

// The result of a call, to come: a handle that copies share. wait() returns the Value or throws
// the call's RpcError (UnknownFunction, RemoteError, RpcTimeout, PeerDied, ...). An async
// function (register_async_function) makes one with Future::make and completes it later.
class Future {
 public:
  static Future make();
  // Blocks until done; the result, or the failure rethrown.
  Value wait() const;
  bool done() const;
  // Whether it failed (done and no value); wait() then throws.
  bool failed() const;
  // Runs fn once done: at once (on this thread) when it is, else on the thread that completes it.
  void then(std::function<void(const Future&)> fn) const;
  // Completes it (the first completion wins; later ones are ignored).
  void set_value(Value value) const;
  void set_error(std::exception_ptr error) const;

  explicit Future(std::shared_ptr<internal::FutureState> state) : state_(std::move(state)) {}
  const std::shared_ptr<internal::FutureState>& state() const { return state_; }

 private:
  std::shared_ptr<internal::FutureState> state_;
};

using Function = std::function<Value(const Call&)>;
using AsyncFunction = std::function<Future(const Call&)>;

// For tests (torch's faulty agent): what this process does to its own outgoing calls.
struct FaultPlan {
  std::map<std::string, int> drop;  // function name -> how many of its first calls never go out
  std::map<std::string, std::chrono::milliseconds> delay;  // function name -> sent this late
};

struct RpcOptions {
  // "env://" (MASTER_ADDR/MASTER_PORT or the launcher's store), "tcp://host:port",
  // "file:///path"; ignored when store is set.
  std::string init_method = "env://";
  std::shared_ptr<Store> store{};
  // Default timeout of a call (torch's rpc_timeout): 60 s.
  std::chrono::milliseconds rpc_timeout{60'000};
  // How long init_rpc waits for every worker. Default: LOCKSTEP_TIMEOUT.
  std::optional<std::chrono::milliseconds> init_timeout{};
  // Threads that read connections and run functions: this many at start, more (up to max_threads)
  // while functions block, so that one reader is always free.
  int threads = 2;
  int max_threads = 64;
  FaultPlan faults{};
};

// Joins the job as worker `name` (1 to 128 of A-Z a-z 0-9 _ - . :), rank and world_size from the
// environment when -1. Collective: returns once every worker has joined. ConfigError for a bad
// name or one another rank has; TimeoutError naming the ranks that never came.
void init_rpc(const std::string& name, int rank = -1, int world_size = -1,
              const RpcOptions& options = {});

// A worker by name; "" is this process's. RpcError when there is none.
WorkerInfo get_worker_info(const std::string& name = "");
std::vector<WorkerInfo> get_worker_infos();

// Functions this process serves, by name (before or after init_rpc). Registering a name twice
// throws InvalidArgument.
void register_function(const std::string& name, Function fn);
void register_async_function(const std::string& name, AsyncFunction fn);
void unregister_function(const std::string& name);
std::vector<std::string> registered_functions();

// Calls `function` on worker `to`. timeout: this call's (default: RpcOptions::rpc_timeout; 0:
// none).
Future rpc_async(const std::string& to, const std::string& function, std::vector<Value> args = {},
                 Dict kwargs = {}, std::optional<std::chrono::milliseconds> timeout = {});
Value rpc_sync(const std::string& to, const std::string& function, std::vector<Value> args = {},
               Dict kwargs = {}, std::optional<std::chrono::milliseconds> timeout = {});

// An object this process owns and serves by name: its methods, callable from any worker through
// a Handle. Served until close() (or destruction); no reference counting (docs/rpc.md says why).
class Served {
 public:
  Served() = default;
  Served(std::string name, std::function<void(const std::string&)> closer)
      : name_(std::move(name)), closer_(std::move(closer)) {}
  Served(Served&& o) noexcept : name_(std::move(o.name_)), closer_(std::exchange(o.closer_, {})) {}
  Served& operator=(Served&& o) noexcept;
  ~Served() { close(); }
  const std::string& name() const { return name_; }
  // Stops serving: later calls fail with UnknownFunction naming the object as closed.
  void close();

 private:
  std::string name_;
  std::function<void(const std::string&)> closer_;
};
Served serve(const std::string& object, std::map<std::string, Function> methods);

// Another worker's served object.
class Handle {
 public:
  Handle(std::string worker, std::string object)
      : worker_(std::move(worker)), object_(std::move(object)) {}
  const std::string& worker() const { return worker_; }
  const std::string& object() const { return object_; }
  Value call(const std::string& method, std::vector<Value> args = {}, Dict kwargs = {},
             std::optional<std::chrono::milliseconds> timeout = {}) const;
  Future call_async(const std::string& method, std::vector<Value> args = {}, Dict kwargs = {},
                    std::optional<std::chrono::milliseconds> timeout = {}) const;

 private:
  std::string worker_, object_;
};
Handle handle(const std::string& worker, const std::string& object);

// What shutdown saw of the other workers.
struct ShutdownReport {
  std::vector<WorkerInfo> dead;        // died before or during shutdown (counted as done)
  std::vector<WorkerInfo> unfinished;  // alive, but not done within the timeout
  bool clean() const { return dead.empty() && unfinished.empty(); }
};
// Graceful: stops new calls from this process, waits for its calls in flight, then keeps serving
// until every other worker is done or dead, at most `timeout` in all; then closes. Never hangs;
// logs a warning naming the dead and unfinished workers.
ShutdownReport shutdown(std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace lockstep::rpc
