// lockstep::rpc across real processes (the test binary re-runs itself in child mode), at world
// sizes 2, 4 and 5: every call form against closed-form results; 4 callers x 10,000 calls
// against one worker with none lost or reordered; faults as torch's faulty agent injects them
// (a dropped call, a delayed one, a function that never answers); a worker SIGKILLed mid-call
// (its pending futures fail at once, naming it and its host; shutdown of every survivor counts it
// dead and returns); a wrong secret (NotAuthorized, and both workers go on); and raw clients (a
// pickle payload, a hello without the secret) that are refused while the worker goes on serving;
// calls of four caller threads running side by side; and a shutdown that keeps its timeout while
// the callee is inside a 30 s function.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "lockstep/rpc/rpc.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "rpc/agent.h"
#include "rpc/directory.h"
#include "rpc/process_agent.h"
#include "support/child_job.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;
using rpc::Value;

int env_int(const char* name) {
  return std::atoi(std::getenv(name));
}
std::string worker_name(int r) {
  return "worker" + std::to_string(r);
}

TcpStore test_store() {
  return TcpStore({.host = "127.0.0.1",
                   .port = static_cast<uint16_t>(env_int("MASTER_PORT")),
                   .timeout = std::chrono::seconds(60)});
}

Job rpc_job(const std::string& name, int world) {
  return Job(name, world, "RpcChild", {.op_timeout = "60", .wait = std::chrono::seconds(120)});
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The functions every child serves.
void register_common() {
  rpc::register_function("add", [](const rpc::Call& c) {
    return Value(c.args.at(0).as_int() + c.args.at(1).as_int());
  });
  rpc::register_function("echo", [](const rpc::Call& c) { return c.args.at(0); });
  rpc::register_function("concat", [](const rpc::Call& c) {
    std::string s = c.args.at(0).as_str();
    Value sep = Value("+");
    for (const auto& [k, v] : c.kwargs)
      if (k.as_str() == "sep") sep = v;
    for (const auto& [k, v] : c.kwargs)
      if (k.as_str() != "sep") s += sep.as_str() + k.as_str() + "=" + v.as_str();
    return Value(s);
  });
  rpc::register_function("fail", [](const rpc::Call& c) -> Value {
    throw std::invalid_argument("bad input " + std::to_string(c.args.at(0).as_int()));
  });
  rpc::register_function("caller", [](const rpc::Call& c) { return Value(c.caller.name); });
  rpc::register_function("sleep_ms", [](const rpc::Call& c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(c.args.at(0).as_int()));
    return Value(c.args.at(0).as_int());
  });
  rpc::register_function("twice", [](const rpc::Call& c) {
    const rpc::Tensor& t = c.args.at(0).as_tensor();
    rpc::Tensor out = rpc::Tensor::zeros(t.type, t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) out.mutable_as<float>()[i] = 2 * t.as<float>()[i];
    return Value(out);
  });
  rpc::register_async_function("add_later", [](const rpc::Call& c) {
    rpc::Future f = rpc::Future::make();
    int64_t sum = c.args.at(0).as_int() + c.args.at(1).as_int();
    std::thread([f, sum] {
      std::this_thread::sleep_for(10ms);
      f.set_value(Value(sum));
    }).detach();
    return f;
  });
}

// ---- child entry points ----

TEST(RpcChild, DISABLED_CallForms) {
  const int me = env_int("RANK"), n = env_int("WORLD_SIZE");
  const int peer = (me + 1) % n;
  const std::string to = worker_name(peer);
  register_common();
  std::atomic<int64_t> total{0};
  rpc::Served counter =
      rpc::serve("counter", {{"add",
                              [&](const rpc::Call& c) {
                                total += c.args.at(0).as_int();
                                return Value(total.load());
                              }},
                             {"get", [&](const rpc::Call&) { return Value(total.load()); }}});
  rpc::init_rpc(worker_name(me));
  TcpStore store = test_store();

  // rpc_sync and rpc_async, positional and keyword arguments.
  ASSERT_EQ(rpc::rpc_sync(to, "add", {me, 100}).as_int(), me + 100);
  std::vector<rpc::Future> futures;
  for (int i = 0; i < 200; ++i) futures.push_back(rpc::rpc_async(to, "add", {i, me * 1000}));
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(futures[static_cast<size_t>(i)].wait().as_int(), i + me * 1000);
  rpc::Dict kw{{Value("sep"), Value("-")}, {Value("b"), Value("x")}};
  ASSERT_EQ(rpc::rpc_sync(to, "concat", {"a"}, kw).as_str(), "a-b=x");
  ASSERT_EQ(rpc::rpc_sync(to, "caller", {}).as_str(), worker_name(me));

  // Every kind of value, nested, comes back equal.
  rpc::Dict d{{Value(1), Value("one")}, {Value("t"), Value(rpc::Tuple{{Value(), Value(true)}})}};
  Value nested(rpc::List{Value(int64_t{-1} << 62), Value(2.5),
                         Value(rpc::Bytes{std::string("a\0b", 3)}), Value(d), Value(rpc::List{}),
                         Value(rpc::Tensor::from(std::vector<int64_t>{7, 8}))});
  ASSERT_TRUE(rpc::rpc_sync(to, "echo", {nested}) == nested) << rpc::describe(nested);

  // A 1M-element tensor, both ways, exactly.
  std::vector<float> xs(1 << 20);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.5f;
  rpc::Tensor doubled = rpc::rpc_sync(to, "twice", {rpc::Tensor::from(xs)}).as_tensor();
  ASSERT_EQ(doubled.numel(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(doubled.as<float>()[i], static_cast<float>(i));

  // An async function, a then() callback.
  ASSERT_EQ(rpc::rpc_sync(to, "add_later", {40, 2}).as_int(), 42);
  std::atomic<int64_t> seen{0};
  rpc::Future later = rpc::rpc_async(to, "add_later", {1, 2});
  later.then([&](const rpc::Future& f) { seen = f.wait().as_int(); });
  later.wait();
  for (int i = 0; i < 100 && seen.load() != 3; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(seen.load(), 3);

  // Errors: the function's exception, an unknown function.
  auto remote = message_of<rpc::RemoteError>([&] { rpc::rpc_sync(to, "fail", {7}); });
  EXPECT_TRUE(contains(remote, "rpc_sync('" + to + "', 'fail')")) << remote;
  EXPECT_TRUE(contains(remote, "std::invalid_argument")) << remote;
  EXPECT_TRUE(contains(remote, "bad input 7")) << remote;
  EXPECT_TRUE(contains(remote, to + " (rank " + std::to_string(peer) + " on host ")) << remote;
  auto unknown = message_of<rpc::UnknownFunction>([&] { rpc::rpc_sync(to, "eval", {"1+1"}); });
  EXPECT_TRUE(contains(unknown, "has no function 'eval'")) << unknown;
  EXPECT_TRUE(contains(unknown, "add, add_later, caller, concat")) << unknown;

  // A served object through a handle; then closed by its owner.
  rpc::Handle h = rpc::handle(to, "counter");
  ASSERT_EQ(h.call("add", {5}).as_int(), 5);
  ASSERT_EQ(h.call_async("add", {6}).wait().as_int(), 11);
  ASSERT_EQ(h.call("get").as_int(), 11);
  auto no_method = message_of<rpc::UnknownFunction>([&] { h.call("reset"); });
  EXPECT_TRUE(contains(no_method, "serves 'counter' without a method 'reset'")) << no_method;
  store.add("test/used", 1);
  store.wait({"test/all_used"}, 60s);  // the test sets it once every rank used its peer's counter
  counter.close();
  store.add("test/closed", 1);
  while (store.add("test/closed", 0) < n) std::this_thread::sleep_for(5ms);
  auto closed = message_of<rpc::UnknownFunction>([&] { h.call("get"); });
  EXPECT_TRUE(contains(closed, "closed its object 'counter'")) << closed;

  rpc::WorkerInfo info = rpc::get_worker_info(to);
  EXPECT_EQ(info.id, peer);
  EXPECT_EQ(info.host, net::hostname());
  EXPECT_EQ(rpc::get_worker_info().name, worker_name(me));
  rpc::ShutdownReport report = rpc::shutdown();
  EXPECT_TRUE(report.clean());
  say("CALL FORMS OK rank " + std::to_string(me));
}

TEST(RpcChild, DISABLED_Concurrency) {
  const int me = env_int("RANK"), n = env_int("WORLD_SIZE");
  constexpr int kCalls = 10'000;
  std::mutex mu;
  std::map<std::string, std::vector<int64_t>> seen;  // caller -> sequence numbers, as run
  rpc::register_function("record", [&](const rpc::Call& c) {
    std::lock_guard lock(mu);
    seen[c.caller.name].push_back(c.args.at(0).as_int());
    return Value(c.args.at(0).as_int() * 3 + me);
  });
  rpc::init_rpc(worker_name(me));
  if (me != 0) {
    std::vector<rpc::Future> futures;
    futures.reserve(kCalls);
    for (int i = 0; i < kCalls; ++i) futures.push_back(rpc::rpc_async("worker0", "record", {i}));
    for (int i = 0; i < kCalls; ++i)
      ASSERT_EQ(futures[static_cast<size_t>(i)].wait().as_int(), i * 3) << "call " << i;
  }
  rpc::ShutdownReport report = rpc::shutdown();  // rank 0: after every caller is done
  ASSERT_TRUE(report.clean());
  if (me == 0) {
    ASSERT_EQ(seen.size(), static_cast<size_t>(n - 1));
    for (const auto& [caller, seqs] : seen) {
      ASSERT_EQ(seqs.size(), static_cast<size_t>(kCalls)) << caller;
      for (int i = 0; i < kCalls; ++i) ASSERT_EQ(seqs[static_cast<size_t>(i)], i) << caller;
    }
    say(detail::concat("ORDER OK ", n - 1, "x", kCalls));
  }
}

TEST(RpcChild, DISABLED_Faults) {
  const int me = env_int("RANK");
  register_common();
  rpc::RpcOptions options;
  if (me == 0) options.faults = {.drop = {{"add", 1}}, .delay = {{"echo", 300ms}}};
  rpc::init_rpc(worker_name(me), -1, -1, options);
  if (me == 0) {
    auto t = Clock::now();
    auto text = message_of<rpc::RpcTimeout>([] {
      rpc::rpc_sync("worker1", "add", {1, 2}, {}, 500ms);
    });
    double took = seconds_since(t);
    EXPECT_TRUE(
        contains(text, "rpc_sync('worker1', 'add'): no answer from worker1 (rank 1 on host "))
        << text;
    EXPECT_TRUE(contains(text, "within 0.50 s (the call's timeout)")) << text;
    EXPECT_GE(took, 0.45);
    EXPECT_LT(took, 2.0);
    EXPECT_EQ(rpc::rpc_sync("worker1", "add", {1, 2}).as_int(), 3);  // only the first was dropped
    t = Clock::now();
    EXPECT_EQ(rpc::rpc_sync("worker1", "echo", {"late"}).as_str(), "late");
    EXPECT_GE(seconds_since(t), 0.3);
    // A function that does not answer in time; its late answer is dropped, the next call works.
    t = Clock::now();
    message_of<rpc::RpcTimeout>([] { rpc::rpc_sync("worker1", "sleep_ms", {1500}, {}, 300ms); });
    took = seconds_since(t);
    EXPECT_GE(took, 0.29);
    EXPECT_LT(took, 1.2);
    std::this_thread::sleep_for(1500ms);
    EXPECT_EQ(rpc::rpc_sync("worker1", "add", {20, 22}).as_int(), 42);
  }
  EXPECT_TRUE(rpc::shutdown().clean());
  say("FAULTS OK rank " + std::to_string(me));
}

TEST(RpcChild, DISABLED_KilledMidCall) {
  const int me = env_int("RANK");
  register_common();
  rpc::register_function("block", [](const rpc::Call&) -> Value {
    for (;;) std::this_thread::sleep_for(1s);
  });
  rpc::init_rpc(worker_name(me));
  TcpStore store = test_store();
  if (me == 0) {
    std::vector<rpc::Future> futures;
    for (int i = 0; i < 3; ++i) futures.push_back(rpc::rpc_async("worker1", "block", {}));
    store.set("test/calling", "1");
    for (auto& f : futures) {
      try {
        f.wait();
      } catch (const rpc::PeerDied& e) {
        report(e);
      }
    }
  }
  if (me == 1) {
    for (;;) std::this_thread::sleep_for(1s);  // killed by the test
  }
  store.wait({"test/killed"}, 60s);
  auto t = Clock::now();
  rpc::ShutdownReport r = rpc::shutdown(10s);
  std::string dead;
  for (const auto& w : r.dead) dead += w.name + " ";
  say(detail::concat("SHUTDOWN DEAD ", dead, "in ", seconds_since(t), " s, unfinished ",
                     r.unfinished.size()));
}

TEST(RpcChild, DISABLED_WrongSecret) {
  const int me = env_int("RANK");
  auto registry = std::make_shared<rpc::Registry>();
  registry->add_function("add", rpc::function_handler([](const rpc::Call& c) {
                           return Value(c.args.at(0).as_int() + c.args.at(1).as_int());
                         }));
  auto agent = rpc::Agent::start(worker_name(me), -1, -1, {}, registry,
                                 me == 0 ? "alpha secret" : "beta secret");
  TcpStore store = test_store();
  if (me == 0) {
    auto text = message_of<rpc::NotAuthorized>([&] {
      agent
          ->call(agent->worker("worker1"), "add", rpc::encode_request("add", nullptr, {1, 2}, {}),
                 {}, "rpc_sync")
          .wait();
    });
    say("NOT AUTHORIZED: " + text);
  }
  // Each still serves what it has the secret for: itself.
  Value v =
      agent->call(agent->self(), "add", rpc::encode_request("add", nullptr, {2, 3}, {}), {}).wait();
  EXPECT_EQ(v.as_int(), 5);
  store.add("test/done", 1);
  while (store.add("test/done", 0) < 2) std::this_thread::sleep_for(5ms);
  agent->shutdown(1s);
  say("STILL SERVING rank " + std::to_string(me));
}

TEST(RpcChild, DISABLED_RawClients) {
  const int me = env_int("RANK");
  auto registry = std::make_shared<rpc::Registry>();
  registry->add_function("add", rpc::function_handler([](const rpc::Call& c) {
                           return Value(c.args.at(0).as_int() + c.args.at(1).as_int());
                         }));
  auto agent = rpc::Agent::start(worker_name(me), -1, -1, {}, registry, "the job's secret");
  TcpStore store = test_store();
  auto add = [&](int64_t a) {
    return agent
        ->call(agent->worker("worker1"), "add", rpc::encode_request("add", nullptr, {a, 1}, {}), {})
        .wait()
        .as_int();
  };
  if (me == 0) {
    EXPECT_EQ(add(1), 2);
    store.set("test/serving", "1");
    store.wait({"test/raw_done"}, 60s);  // the test's raw clients have been refused
    EXPECT_EQ(add(41), 42);
    say("STILL SERVING after raw clients");
  }
  store.add("test/done", 1);
  while (store.add("test/done", 0) < 2) std::this_thread::sleep_for(5ms);
  agent->shutdown(1s);
}

TEST(RpcChild, DISABLED_SideBySideAndBoundedShutdown) {
  const int me = env_int("RANK");
  register_common();
  rpc::register_function("forever", [](const rpc::Call&) -> Value {
    std::this_thread::sleep_for(30s);
    return Value();
  });
  rpc::init_rpc(worker_name(me));
  TcpStore store = test_store();
  if (me == 0) {
    // Four caller threads, one 500 ms call each: they run side by side on worker1.
    auto t = Clock::now();
    std::vector<std::thread> callers;
    for (int i = 0; i < 4; ++i)
      callers.emplace_back([] { rpc::rpc_sync("worker1", "sleep_ms", {500}); });
    for (auto& c : callers) c.join();
    say(detail::concat("FOUR THREADS took ", seconds_since(t), " s"));
    rpc::rpc_async("worker1", "forever", {});
    store.set("test/forever", "1");
  }
  store.wait({"test/forever"}, 60s);
  std::this_thread::sleep_for(100ms);
  auto t = Clock::now();
  rpc::ShutdownReport report = rpc::shutdown(2s);  // worker1 is in `forever`: neither waits 30 s
  say(detail::concat("SHUTDOWN took ", seconds_since(t), " s, unfinished ",
                     report.unfinished.size()));
}

// ---- the tests ----

void expect_ok(Job& job, int world, const std::string& line) {
  for (int r = 0; r < world; ++r) {
    auto result = job.wait(r);
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ":\n" << result.output;
    EXPECT_TRUE(contains(result.output, line + std::to_string(r))) << result.output;
  }
}

// rank 0 sets test/all_used once every rank has used its peer's counter.
void release_counters(Job& job, int world) {
  TcpStore store = job.store();
  while (store.add("test/used", 0) < world) std::this_thread::sleep_for(5ms);
  store.set("test/all_used", "1");
}

TEST(RpcProcesses, EveryCallFormAtWorldSizeTwo) {
  Job job = rpc_job("CallForms", 2);
  release_counters(job, 2);
  expect_ok(job, 2, "CALL FORMS OK rank ");
}

TEST(RpcProcesses, EveryCallFormAtWorldSizeFour) {
  Job job = rpc_job("CallForms", 4);
  release_counters(job, 4);
  expect_ok(job, 4, "CALL FORMS OK rank ");
}

TEST(RpcProcesses, FourCallersTimesTenThousandCallsAreNeitherLostNorReordered) {
  Job job = rpc_job("Concurrency", 5);
  auto r0 = job.wait(0);
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_TRUE(contains(r0.output, "ORDER OK 4x10000")) << r0.output;
  for (int r = 1; r < 5; ++r) {
    auto result = job.wait(r);
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ":\n" << result.output;
  }
}

TEST(RpcProcesses, DroppedDelayedAndUnansweredCallsAreTimedOutOrDeliveredByName) {
  Job job = rpc_job("Faults", 2);
  expect_ok(job, 2, "FAULTS OK rank ");
}

TEST(RpcProcesses, AWorkerKilledMidCallFailsItsFuturesAtOnceAndShutdownCountsItDead) {
  Job job = rpc_job("KilledMidCall", 3);
  TcpStore store = job.store();
  store.wait({"test/calling"}, 60s);
  std::this_thread::sleep_for(200ms);  // the three calls are in the function
  const int64_t killed_at = now_ns();
  job.child(1).kill(SIGKILL);
  store.set("test/killed", "1");
  const std::string host = net::hostname();
  auto r0 = job.wait(0);
  SCOPED_TRACE("rank 0:\n" + r0.output);
  EXPECT_EQ(count_of(r0.output, "CAUGHT other"), 3u);  // PeerDied is an RpcError
  EXPECT_TRUE(
      contains(r0.output, "rpc_async('worker1', 'block'): worker1 (rank 1 on host " + host));
  EXPECT_TRUE(contains(r0.output, "died before answering ("));
  EXPECT_TRUE(contains(r0.output, " s after the call): "));
  EXPECT_FALSE(contains(r0.output, " s s "));
  const int64_t at = caught_at(r0.output);
  ASSERT_GT(at, 0);
  EXPECT_LT(static_cast<double>(at - killed_at) / 1e9, 2.0);
  EXPECT_TRUE(contains(r0.output, "SHUTDOWN DEAD worker1 in")) << r0.output;
  // Rank 2 never called worker1: its shutdown finds it dead by its port.
  auto r2 = job.wait(2);
  EXPECT_TRUE(contains(r2.output, "SHUTDOWN DEAD worker1 in")) << r2.output;
  for (auto* out : {&r0.output, &r2.output}) {
    size_t p = out->find("SHUTDOWN DEAD worker1 in ");
    ASSERT_NE(p, std::string::npos);
    EXPECT_LT(std::stod(out->substr(p + 25)), 5.0) << *out;
    EXPECT_TRUE(contains(*out, "unfinished 0")) << *out;
  }
}

// The number after `label` in a child's output.
double figure_after(const std::string& output, const std::string& label) {
  size_t p = output.find(label);
  return p == std::string::npos ? -1 : std::stod(output.substr(p + label.size()));
}

TEST(RpcProcesses, CallsOfDifferentThreadsRunSideBySideAndShutdownKeepsItsTimeout) {
  Job job = rpc_job("SideBySideAndBoundedShutdown", 2);
  auto r0 = job.wait(0), r1 = job.wait(1);
  const double four = figure_after(r0.output, "FOUR THREADS took ");
  EXPECT_GT(four, 0.45) << r0.output;
  EXPECT_LT(four, 1.4) << r0.output;  // one after another would be 2 s
  for (auto* out : {&r0.output, &r1.output}) {
    const double took = figure_after(*out, "SHUTDOWN took ");
    EXPECT_GT(took, 0.0) << *out;
    EXPECT_LT(took, 4.0) << *out;  // 2 s, and a moment
  }
}

TEST(RpcProcesses, AWrongSecretIsRefusedAsNotAuthorizedAndBothWorkersGoOn) {
  Job job = rpc_job("WrongSecret", 2);
  auto r0 = job.wait(0), r1 = job.wait(1);
  EXPECT_TRUE(contains(r0.output, "NOT AUTHORIZED: rpc_sync('worker1', 'add'): ")) << r0.output;
  EXPECT_TRUE(contains(r0.output, "worker1 (rank 1 on host ")) << r0.output;
  EXPECT_TRUE(contains(r0.output, "secret")) << r0.output;
  EXPECT_TRUE(contains(r0.output, "STILL SERVING rank 0")) << r0.output;
  EXPECT_TRUE(contains(r1.output, "STILL SERVING rank 1")) << r1.output;
}

// Connects to rank 1's rpc listener, sends `bytes`, and returns how long until the worker closed
// the connection (-1: it did not within 5 s).
double closed_after(const rpc::WorkerRecord& w, const std::string& bytes) {
  net::Fd fd = net::connect_tcp(w.address, w.port, Deadline::after(5s), false);
  auto t = Clock::now();
  net::write_full(fd.get(), bytes.data(), bytes.size(), Deadline::after(5s), "worker1");
  char buf[256];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return -1;
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) return seconds_since(t);
  }
}

TEST(RpcProcesses, RawClientsArePickleAndNoSecretAreRefusedWhileTheWorkerGoesOn) {
  Job job = rpc_job("RawClients", 2);
  TcpStore store = job.store();
  store.wait({"test/serving"}, 60s);
  rpc::WorkerRecord w = rpc::parse_record(store.get("rpc/worker/1"), 1);
  // torch's RPC would unpickle this: os.system('touch /tmp/pwned') by __reduce__.
  static const char kPickle[] =
      "\x80\x04\x95\x2a\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system"
      "\x94\x93\x94\x8c\x10touch /tmp/pwned\x94\x85\x94R\x94.";
  const std::string pickle(kPickle, sizeof kPickle - 1);
  double t = closed_after(w, pickle);
  EXPECT_GE(t, 0.0) << "the worker kept a pickle-speaking connection open";
  EXPECT_LT(t, 1.0);
  // A well-formed hello without the secret: refused (a status, then closed).
  net::Hello hello = net::make_hello({.service = net::Service::rpc,
                                      .group = "rpc",
                                      .size = 2,
                                      .rank = 0,
                                      .host = "intruder",
                                      .has_secret = false});
  std::string opening(reinterpret_cast<const char*>(&hello), sizeof hello);
  opening += std::string(32, 'n');
  t = closed_after(w, opening);
  EXPECT_GE(t, 0.0);
  EXPECT_LT(t, 1.0);
  store.set("test/raw_done", "1");
  auto r0 = job.wait(0), r1 = job.wait(1);
  EXPECT_TRUE(contains(r0.output, "STILL SERVING after raw clients")) << r0.output;
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_TRUE(contains(r1.output, "rpc: refused a connection from 127.0.0.1")) << r1.output;
  EXPECT_TRUE(contains(r1.output, "does not speak lockstep rpc")) << r1.output;
  EXPECT_TRUE(contains(r1.output, "has no secret")) << r1.output;
}

}  // namespace
}  // namespace lockstep::testing
