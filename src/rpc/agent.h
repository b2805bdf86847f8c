// Agent: one worker's RPC machinery. It listens where the job advertises this process, connects
// to a worker on the first call to it, and runs a small pool of threads that wait on one poller
// (epoll, one-shot per connection): whichever thread gets a connection's event reads it, re-arms
// it, and runs the calls that arrived, so a call needs no hand-off between threads on either side.
// The pool grows while functions block, so that a thread is always free to read answers.
//
// Calls of one caller thread run on the callee one at a time, in the order sent (a strand per
// lane); calls of other threads, or other workers, run beside them. A timer thread fails calls
// past their deadline. A connection that ends without a goodbye fails its pending calls at once
// with PeerDied, naming the worker, its host and the socket's last word.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/rpc/rpc.h"
#include "lockstep/store/store.h"
#include "net/hello.h"
#include "net/socket.h"
#include "rpc/connection.h"
#include "rpc/directory.h"
#include "rpc/registry.h"

namespace lockstep::rpc {

class Agent : public std::enable_shared_from_this<Agent> {
 public:
  // init_rpc's work: rendezvous, listener, directory, threads. `secret` overrides the
  // environment's (tests).
  static std::shared_ptr<Agent> start(const std::string& name, int rank, int world_size,
                                      const RpcOptions& options, std::shared_ptr<Registry> registry,
                                      std::optional<std::string> secret = std::nullopt);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const WorkerInfo& self() const { return workers_[static_cast<size_t>(rank_)].info; }
  // RpcError naming the known workers when there is no such one.
  const WorkerInfo& worker(const std::string& name) const;
  const WorkerInfo& worker(int rank) const;
  std::vector<WorkerInfo> workers() const;
  Registry& registry() { return *registry_; }
  std::chrono::milliseconds default_timeout() const { return options_.rpc_timeout; }

  // Sends a request whose body (request_body) is already encoded. `function` names it in errors.
  // The future completes with the reply message, or fails with the call's RpcError.
  // sync: returns once the call is done (rpc_sync), having waited on the connection itself.
  Future call(const WorkerInfo& to, const std::string& function, Message request,
              std::optional<std::chrono::milliseconds> timeout, const char* form = "rpc_async",
              bool sync = false);

  ShutdownReport shutdown(std::chrono::milliseconds timeout);
  bool is_shut_down() const { return state_.load() == State::closed; }

 private:
  enum class State { running, draining, closed };
  enum class PeerState { alive, dead, gone };
  struct Peer {
    std::mutex mu;  // serializes connecting
    std::shared_ptr<Connection> out;
    PeerState state = PeerState::alive;
    std::string end;  // how it died or left, for messages
  };

  Agent(std::string name, int rank, int world_size, const RpcOptions& options,
        std::shared_ptr<Registry> registry, std::string secret);
  void open(std::shared_ptr<Store> store, const std::string& advertise,
            std::chrono::milliseconds timeout);

  // The connection to `rank`, made on first use. Its RpcErrors name the call (`what`).
  std::shared_ptr<Connection> outgoing(int rank, Deadline deadline, const std::string& what);
  void add_connection(const std::shared_ptr<Connection>& conn);
  void arm(const Connection& conn);
  std::shared_ptr<Connection> find_connection(uint64_t id);
  void drop_connection(const std::shared_ptr<Connection>& conn);

  // The pool.
  void serve_loop();
  void maybe_grow();
  void accept_all();
  void on_event(const std::shared_ptr<Connection>& conn);
  void on_handshake(const std::shared_ptr<Connection>& conn);
  // What one read of a connection brought (read_batch, with its read_mu held) and what is done
  // with it after (finish_batch): answers completed, strands run, an end handled.
  struct Batch {
    FrameReader::Status status = FrameReader::Status::more;
    std::vector<Frame> frames;
    std::vector<uint32_t> lanes;
    std::vector<Frame*> answers;
    std::string garbage;
  };
  Batch read_batch(const std::shared_ptr<Connection>& conn);
  void finish_batch(const std::shared_ptr<Connection>& conn, Batch& batch);
  // A synchronous caller waits for its answer by reading the connection itself (when no pool
  // thread is), which saves the hand-off from the thread that read it.
  void wait_reading(const std::shared_ptr<Connection>& conn,
                    const std::shared_ptr<internal::FutureState>& state);
  void run_strand(const std::shared_ptr<Connection>& conn, uint32_t lane);
  void dispatch(const std::shared_ptr<Connection>& conn, Frame& frame);
  void complete(const std::shared_ptr<Connection>& conn, Frame& frame);
  // The connection ended (errno err, 0: a clean close): its pending calls fail, the peer is dead
  // unless it said goodbye.
  // mark_dead false: the peer is not to blame (this side's send timed out).
  void end_connection(const std::shared_ptr<Connection>& conn, int err, const std::string& why,
                      bool mark_dead = true);
  std::exception_ptr end_error(int rank, const PendingCall& call);
  void mark_peer(int rank, PeerState state, const std::string& end);

  // The timer.
  void timer_loop();
  void arm_timer(uint64_t call_id, const std::shared_ptr<Connection>& conn,
                 Clock::time_point deadline);
  void disarm_timer(uint64_t call_id, Clock::time_point deadline);
  // The pending call of that id, taken off its connection and its timer (none: it is done).
  std::optional<PendingCall> take_pending(const std::shared_ptr<Connection>& conn,
                                          uint64_t call_id);
  void fail_call(const std::shared_ptr<Connection>& conn, uint64_t call_id,
                 std::exception_ptr error);
  void sweep_handshakes(Clock::time_point now);

  // Shutdown's parts.
  void wait_own_calls(Deadline deadline);
  void wait_others(Deadline deadline, ShutdownReport& report);
  bool probe_dead(int rank);
  // Stops the pool, waiting for threads still in a function until `deadline` (then leaves them).
  void close_all(Deadline deadline = Deadline::after(std::chrono::milliseconds(0)));
  void send_goodbyes();

  bool fault(const std::string& function, std::chrono::milliseconds& delay);

  const int rank_, world_size_;
  RpcOptions options_;
  std::shared_ptr<Registry> registry_;
  const std::string secret_;
  const std::string name_;
  std::shared_ptr<Store> store_;  // the job's, under "rpc/"
  bool hosts_store_ = false;
  net::Endpoint endpoint_;
  std::vector<WorkerRecord> workers_;
  std::map<std::string, int> by_name_;
  std::vector<std::unique_ptr<Peer>> peers_;

  net::Fd listener_;
  net::Fd epoll_;
  net::Fd wake_;  // an eventfd: written once to stop every thread
  std::mutex conns_mu_;
  std::map<uint64_t, std::shared_ptr<Connection>> conns_;
  std::atomic<uint64_t> next_conn_id_{16};
  std::atomic<uint64_t> next_call_id_{1};

  // A pool thread and whether it has left its loop. Each holds a reference to the agent, so that
  // one that shutdown leaves behind (still in a function past the deadline) finds it alive.
  struct PoolThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> exited;
  };
  void spawn_thread();  // pool_mu_ held
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;  // a thread left its loop
  std::vector<PoolThread> pool_;
  // Lanes that arrived in one read beside the one its reader runs: other threads take them
  // (kick_, an eventfd semaphore in the poller), so that calls of different caller threads run
  // side by side.
  std::mutex ready_mu_;
  std::deque<std::pair<std::weak_ptr<Connection>, uint32_t>> ready_;
  net::Fd kick_;
  void hand_off(const std::shared_ptr<Connection>& conn, uint32_t lane);
  void run_handed_off();
  std::atomic<int> idle_{0};
  std::atomic<int> threads_{0};
  bool pool_closed_ = false;  // pool_mu_

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;
  std::map<uint64_t, std::weak_ptr<Connection>> timed_;
  bool timer_stop_ = false;
  std::thread timer_;

  std::mutex fault_mu_;
  std::map<std::string, int> dropped_;

  std::atomic<State> state_{State::running};
  std::mutex shutdown_mu_;
  std::optional<ShutdownReport> report_;
};

// The body of a request for `target` (a function, or a method of served `object`), arguments to
// follow: the Writer appends the args tuple and the kwargs dict after it.
Message request_head(const std::string& target, const std::string* object);

// The calling thread's lane (frame.h).
uint32_t this_lane();

}  // namespace lockstep::rpc
