// Agent: start, the directory of workers, outgoing calls and connections (agent.h). The pool is in
// agent_pool.cc, the timer in agent_timer.cc, shutdown in agent_shutdown.cc.
#include "rpc/agent.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "group/job_store.h"
#include "lockstep/core/settings.h"
#include "lockstep/store/prefix_store.h"
#include "lockstep/store/tcp_store.h"
#include "net/bind.h"
#include "rpc/agent_detail.h"
#include "rpc/codec.h"

namespace lockstep::rpc {

namespace {
std::atomic<uint32_t> g_next_lane{1};
}  // namespace

thread_local bool t_in_handler = false;
thread_local const WorkerInfo* t_caller = nullptr;

uint32_t this_lane() {
  thread_local uint32_t lane = g_next_lane.fetch_add(1);
  return lane;
}

Message request_head(const std::string& target, const std::string* object) {
  Message m;
  Writer w(m);
  w.str(target);
  if (object)
    w.str(*object);
  else
    w.none();
  return m;
}

std::string seconds_text(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", std::chrono::duration<double>(d).count());
  return buf;
}

std::string describe(const WorkerInfo& w) {
  return detail::concat(w.name, " (rank ", w.id, " on host ", w.host, ", pid ", w.pid, ")");
}

std::shared_ptr<Agent> Agent::start(const std::string& name, int rank, int world_size,
                                    const RpcOptions& options, std::shared_ptr<Registry> registry,
                                    std::optional<std::string> secret) {
  check_worker_name(name);
  LOCKSTEP_ENFORCE(options.threads >= 1 && options.max_threads >= options.threads, InvalidArgument,
                   "init_rpc: threads (", options.threads,
                   ") must be at least 1 and at most max_threads (", options.max_threads, ")");
  InitOptions io;
  io.init_method = options.init_method;
  io.rank = rank;
  io.world_size = world_size;
  io.store = options.store;
  io.timeout = options.init_timeout;
  io.group_name = "rpc";
  JobStore job = open_job_store(io);
  std::shared_ptr<Agent> agent(new Agent(name, job.rv.rank, job.rv.world_size, options,
                                         std::move(registry),
                                         secret ? *secret : job_secret_from_environment()));
  agent->hosts_store_ = job.hosts_server;
  agent->open(std::make_shared<PrefixStore>("rpc", job.store), job.advertise_address,
              options.init_timeout.value_or(settings().timeout));
  log_info("init_rpc: worker '", name, "' is rank ", agent->rank_, " of ", agent->world_size_,
           ", store ", job.description);
  return agent;
}

Agent::Agent(std::string name, int rank, int world_size, const RpcOptions& options,
             std::shared_ptr<Registry> registry, std::string secret)
    : rank_(rank),
      world_size_(world_size),
      options_(options),
      registry_(std::move(registry)),
      secret_(std::move(secret)),
      name_(std::move(name)) {
  endpoint_ = net::Endpoint{.service = net::Service::rpc,
                            .group = "rpc",
                            .size = world_size,
                            .rank = rank,
                            .host = net::hostname(),
                            .has_secret = !secret_.empty()};
}

void Agent::open(std::shared_ptr<Store> store, const std::string& advertise,
                 std::chrono::milliseconds timeout) {
  store_ = std::move(store);
  listener_ = net::listen_where_advertised(advertise, 0, "the rpc listener");
  net::set_nonblocking(listener_.get(), true);
  WorkerRecord me{WorkerInfo{name_, rank_, net::hostname(), static_cast<int>(::getpid())},
                  advertise, net::local_port(listener_.get())};
  workers_ = join_directory(*store_, me, world_size_, timeout);
  for (const WorkerRecord& r : workers_) {
    by_name_[r.info.name] = r.info.id;
    peers_.push_back(std::make_unique<Peer>());
  }
  epoll_ = net::Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  LOCKSTEP_ENFORCE(epoll_.valid() && wake_.valid(), NetworkError,
                   "init_rpc: cannot make a poller: ", net::errno_text(errno));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = kListenerId;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  ev.events = EPOLLIN;  // level-triggered: once written, it wakes every thread
  ev.data.u64 = kWakeId;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  kick_ = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE));
  ev.events = EPOLLIN;  // level-triggered: each read takes one handed-off lane
  ev.data.u64 = kKickId;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, kick_.get(), &ev);
  timer_ = std::thread([this] { timer_loop(); });
  {
    std::lock_guard lock(pool_mu_);
    for (int i = 0; i < options_.threads; ++i) spawn_thread();
  }
  if (secret_.empty())
    log_warning(
        "rpc: no job secret (LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE), so rpc "
        "connections are not authenticated: anyone who reaches port ",
        me.port, " can call this worker's registered functions. `lockstep run` sets one");
}

Agent::~Agent() {
  if (state_.load() != State::closed) {
    state_ = State::closed;
    close_all();
  }
}

const WorkerInfo& Agent::worker(int rank) const {
  LOCKSTEP_ENFORCE(rank >= 0 && rank < world_size_, RpcError, "rpc: there is no worker of rank ",
                   rank, " (the job has ", world_size_, ")");
  return workers_[static_cast<size_t>(rank)].info;
}

const WorkerInfo& Agent::worker(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return worker(it->second);
  std::vector<std::string> names;
  for (const auto& [n, r] : by_name_) names.push_back(n);
  throw RpcError(detail::concat("rpc: there is no worker named '", name,
                                "'; the job's workers are ", name_list(names)),
                 name);
}

std::vector<WorkerInfo> Agent::workers() const {
  std::vector<WorkerInfo> all;
  for (const WorkerRecord& r : workers_) all.push_back(r.info);
  return all;
}

std::shared_ptr<Connection> Agent::outgoing(int rank, Deadline deadline, const std::string& what) {
  Peer& p = *peers_[static_cast<size_t>(rank)];
  const WorkerRecord& r = workers_[static_cast<size_t>(rank)];
  const std::string who = describe(r.info);
  const std::string& name = r.info.name;
  std::lock_guard lock(p.mu);
  if (p.out) return p.out;
  if (p.state == PeerState::dead) throw PeerDied(what + ": " + who + " is dead: " + p.end, name);
  if (p.state == PeerState::gone)
    throw ShutdownInProgress(what + ": " + who + " has shut down rpc", name);
  net::Fd fd;
  Deadline connect_by(std::min(deadline.at(), Clock::now() + std::chrono::seconds(30)));
  int err = net::connect_tcp_once(r.address, r.port, connect_by, fd);
  if (err == ECONNREFUSED || net::is_unreachable(err))
    throw PeerDied(detail::concat(what, ": ", who, " cannot be reached at ", r.address, ":", r.port,
                                  " (", net::errno_text(err),
                                  err == ECONNREFUSED ? "): its process has ended" : ")"),
                   name);
  if (err != 0)
    throw RpcTimeout(detail::concat(what, ": could not connect to ", who, " at ", r.address, ":",
                                    r.port, ": ", net::errno_text(err)),
                     name);
  net::tune_tcp(fd.get(), 0);
  net::keep_link_alive(fd.get(), settings().link_timeout);
  try {
    connect_handshake(fd.get(), endpoint_, secret_, connect_by, who);
  } catch (const NotAuthorized& e) {
    throw NotAuthorized(what + ": " + e.what(), name);
  } catch (const TimeoutError& e) {
    throw RpcTimeout(what + ": " + e.what(), name);
  } catch (const NetworkError& e) {  // it answered, but not as a worker of this job
    throw RpcError(what + ": " + e.what(), name);
  }
  net::set_nonblocking(fd.get(), true);
  auto conn = std::make_shared<Connection>(Connection::Side::outgoing, std::move(fd),
                                           next_conn_id_.fetch_add(1), rank);
  add_connection(conn);
  p.out = conn;
  return conn;
}

Future Agent::call(const WorkerInfo& to, const std::string& function, Message request,
                   std::optional<std::chrono::milliseconds> timeout, const char* form, bool sync) {
  const std::string what = detail::concat(form, "('", to.name, "', '", function, "')");
  State st = state_.load();
  if (st == State::closed)
    throw ShutdownInProgress(what + ": rpc is shut down on this worker", to.name);
  if (st == State::draining && !t_in_handler)
    throw ShutdownInProgress(what + ": shutdown() has begun on this worker: it takes no new calls",
                             to.name);
  try {
    frame_prefix(FrameKind::request, 0, 0, request);  // refused before it is anyone's
  } catch (const CodecError& e) {
    throw CodecError(what + ": " + e.what(), to.name);
  }
  auto failed = [&](std::exception_ptr e) {
    Future f = Future::make();
    f.state()->complete_error(f.state(), std::move(e));
    return f;
  };
  const std::chrono::milliseconds t = timeout.value_or(options_.rpc_timeout);
  const Clock::time_point now = Clock::now();
  const Clock::time_point deadline = t.count() > 0 ? now + t : Clock::time_point::max();
  const Deadline send_by(t.count() > 0 ? deadline : now + std::chrono::hours(24));
  std::shared_ptr<Connection> conn;
  try {
    conn = outgoing(to.id, send_by, what);
  } catch (const RpcError&) {  // about the peer: the call's future says it
    return failed(std::current_exception());
  }
  auto state = std::make_shared<internal::FutureState>();
  const uint64_t id = next_call_id_.fetch_add(1);
  {
    std::lock_guard lock(conn->mu);
    if (conn->ended) return failed(end_error(to.id, PendingCall{state, what, now, deadline}));
    conn->pending.emplace(id, PendingCall{state, what, now, deadline});
  }
  if (deadline != Clock::time_point::max()) arm_timer(id, conn, deadline);
  std::chrono::milliseconds delay{0};
  if (fault(function, delay)) return Future(state);  // a dropped message: only the timer answers
  const uint32_t lane = this_lane();
  if (delay.count() > 0) {
    std::thread([self = shared_from_this(), conn, id, lane, delay, send_by,
                 request = std::move(request)] {
      std::this_thread::sleep_for(delay);
      if (int err = conn->send(FrameKind::request, id, lane, request, send_by))
        self->end_connection(conn, err, "sending a delayed call failed");
    }).detach();
    return Future(state);
  }
  if (int err = conn->send(FrameKind::request, id, lane, request, send_by)) {
    if (err == ETIMEDOUT) {  // alive but not reading: this call times out, the stream is cut
      fail_call(conn, id,
                std::make_exception_ptr(RpcTimeout(
                    detail::concat(what, ": ", describe(to), " took none of the call's ",
                                   request.body.size(), " bytes within the call's timeout"),
                    to.name)));
      end_connection(conn, err, "a send timed out", false);
    } else {
      end_connection(conn, err, "sending the call failed");
    }
  }
  if (sync) wait_reading(conn, state);
  return Future(state);
}

bool Agent::fault(const std::string& function, std::chrono::milliseconds& delay) {
  if (options_.faults.drop.empty() && options_.faults.delay.empty()) return false;
  std::lock_guard lock(fault_mu_);
  auto d = options_.faults.drop.find(function);
  if (d != options_.faults.drop.end() && dropped_[function] < d->second) {
    ++dropped_[function];
    return true;
  }
  auto l = options_.faults.delay.find(function);
  if (l != options_.faults.delay.end()) delay = l->second;
  return false;
}

void Agent::add_connection(const std::shared_ptr<Connection>& conn) {
  {
    std::lock_guard lock(conns_mu_);
    conns_[conn->id] = conn;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = conn->id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn->fd.get(), &ev);
}

void Agent::arm(const Connection& conn) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = conn.id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conn.fd.get(), &ev);
}

std::shared_ptr<Connection> Agent::find_connection(uint64_t id) {
  std::lock_guard lock(conns_mu_);
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second;
}

void Agent::drop_connection(const std::shared_ptr<Connection>& conn) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn->fd.get(), nullptr);
  // Not closed here: another thread may be sending on it. The socket closes with the last
  // reference; shutting it down now ends every read and write on it.
  ::shutdown(conn->fd.get(), SHUT_RDWR);
  std::lock_guard lock(conns_mu_);
  conns_.erase(conn->id);
}

void Agent::mark_peer(int rank, PeerState state, const std::string& end) {
  if (rank < 0 || rank >= world_size_) return;
  Peer& p = *peers_[static_cast<size_t>(rank)];
  std::lock_guard lock(p.mu);
  if (p.state != PeerState::alive) return;
  p.state = state;
  p.end = end;
}

std::exception_ptr Agent::end_error(int rank, const PendingCall& call) {
  const WorkerInfo& w = worker(rank);
  if (state_.load() == State::closed)
    return std::make_exception_ptr(ShutdownInProgress(
        call.what + ": rpc shut down on this worker before the answer came", w.name));
  Peer& p = *peers_[static_cast<size_t>(rank)];
  PeerState state;
  std::string end;
  {
    std::lock_guard lock(p.mu);
    state = p.state;
    end = p.end;
  }
  const std::string waited = seconds_text(Clock::now() - call.started);
  if (state == PeerState::gone)
    return std::make_exception_ptr(ShutdownInProgress(
        detail::concat(call.what, ": ", describe(w), " shut down rpc before answering"), w.name));
  if (state == PeerState::alive)
    return std::make_exception_ptr(
        RpcError(detail::concat(call.what, ": the connection to ", describe(w),
                                " was closed before the answer came (", waited, " after the call)"),
                 w.name));
  return std::make_exception_ptr(
      PeerDied(detail::concat(call.what, ": ", describe(w), " died before answering (", waited,
                              " after the call): ", end),
               w.name));
}

void Agent::end_connection(const std::shared_ptr<Connection>& conn, int err, const std::string& why,
                           bool mark_dead) {
  std::unordered_map<uint64_t, PendingCall> pending;
  bool goodbye;
  {
    std::lock_guard lock(conn->mu);
    if (conn->ended) return;
    conn->ended = true;
    pending.swap(conn->pending);
    goodbye = conn->goodbye;
  }
  drop_connection(conn);
  const int rank = conn->peer.load();
  if (rank >= 0) {
    if (conn->side == Connection::Side::outgoing) {
      Peer& p = *peers_[static_cast<size_t>(rank)];
      std::lock_guard lock(p.mu);
      if (p.out == conn) p.out.reset();
    }
    if (goodbye)
      mark_peer(rank, PeerState::gone, "it shut down rpc");
    else if (mark_dead && state_.load() != State::closed && conn->established.load())
      mark_peer(rank, PeerState::dead,
                net::is_unreachable(err)
                    ? net::unreachable_text(err)
                    : detail::concat("its connection ended without a goodbye (", why,
                                     err ? ": " + net::errno_text(err) : std::string(), ")"));
  }
  for (auto& [id, call] : pending) {
    if (call.deadline != Clock::time_point::max()) disarm_timer(id, call.deadline);
    call.state->complete_error(call.state, end_error(rank, call));
  }
}

}  // namespace lockstep::rpc
