// Figures for the store server's resource limits: under each abuse of tcp_store_flood_test.cc,
// tcp_store_slowloris_test.cc and tcp_store_huge_value_test.cc, and without any, the time a
// 4-rank rendezvous takes while the abuse goes on (for the flood: while its second half
// arrives), then, with the abuse wholly in place, the median time of a small request and the
// abusers' connections the server holds, the server's peak memory (VmHWM of its own process)
// and CPU time, and how long 10,000 connections take to open: the median of 3 runs and the
// spread [min..max]. A measurement, not a check, so it is not part of the normal run; run it with
//   test_store --gtest_also_run_disabled_tests --gtest_filter='TcpStoreAbuseFigures.*'
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "lockstep/store/tcp_store.h"
#include "net/fd_limit.h"
#include "store/protocol.h"
#include "store_abuse.h"
#include "store_server_child.h"
#include "store_test_util.h"
#include "support/wait_for.h"

namespace lockstep::store_test {
namespace {

constexpr int kRuns = 3;
constexpr int kRanks = 4;
constexpr int kIdleConnections = 10'000;
// Small requests timed one after another on one connection, for the cost of one (the median).
constexpr int kTimedRequests = 2000;

struct Figures {
  double rendezvous_ms, request_us, held, peak_rss_mib, cpu_ms;
};

// An abuse under way against a server; destroying it ends it.
struct Abuse {
  virtual ~Abuse() = default;
  // Waits until the abuse is wholly in place (a flood: every connection open).
  virtual void complete() {}
};
using StartAbuse = std::function<std::unique_ptr<Abuse>(const ServerChild& server)>;

std::unique_ptr<Abuse> no_abuse(const ServerChild&) {
  return std::make_unique<Abuse>();
}

// How long each flood of idle connections took to open, in ms: the server's accept rate.
std::vector<double> flood_ms;

// The flood goes on in a thread of its own; the rendezvous starts when half of it is open.
struct IdleFlood : Abuse {
  std::atomic<int> opened{0};
  std::vector<net::Fd> fds;
  std::thread thread;
  Clock::time_point start = Clock::now();
  void complete() override {
    if (!thread.joinable()) return;
    thread.join();
    flood_ms.push_back(static_cast<double>(ms_since(start)));
  }
  ~IdleFlood() override { complete(); }
};

std::unique_ptr<Abuse> idle_connections(const ServerChild& server) {
  auto flood = std::make_unique<IdleFlood>();
  flood->thread = std::thread([flood = flood.get(), port = server.port()] {
    flood->fds = open_idle_connections(port, kIdleConnections, 20,
                                       Deadline::after(milliseconds(120'000)), &flood->opened);
  });
  testing::wait_until([&] { return flood->opened >= kIdleConnections / 2; }, milliseconds(120'000));
  return flood;
}

struct Slowloris : Abuse {
  std::vector<std::unique_ptr<SlowSender>> senders;
};

std::unique_ptr<Abuse> slowloris(const ServerChild& server) {
  auto abuse = std::make_unique<Slowloris>();
  abuse->senders.push_back(
      std::make_unique<SlowSender>(raw_connect(server.port()), hello_bytes(), milliseconds(1000)));
  abuse->senders.push_back(std::make_unique<SlowSender>(
      raw_authenticated(server.port(), kAbuseSecret),
      set_announcing("slow", 1000) + std::string(1000, 'x'), milliseconds(1000)));
  std::this_thread::sleep_for(milliseconds(1500));  // both are part-way through
  return abuse;
}

struct HugeValue : Abuse {
  net::Fd fd;
};

std::unique_ptr<Abuse> huge_value(const ServerChild& server) {
  auto abuse = std::make_unique<HugeValue>();
  abuse->fd = raw_authenticated(server.port(), kAbuseSecret);
  raw_send(abuse->fd.get(), set_announcing("huge", uint64_t{1} << 40));
  return abuse;
}

// The median time of one small request: robust to the moments when other work on the machine
// takes the CPU.
double request_us(uint16_t port) {
  TcpStore store({.port = port, .timeout = milliseconds(30'000), .secret = kAbuseSecret});
  store.set("probe", "x");
  std::vector<double> us;
  for (int i = 0; i < kTimedRequests; ++i) {
    const auto t0 = Clock::now();
    store.check({"probe"});
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

int fds_of(int pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

Figures run_once(const StartAbuse& start) {
  ServerChild server;
  // The server's first connection pays for its one-time set-up (OpenSSL's random generator, the
  // first page faults): ~10 ms, made here so that every case starts from a warm server.
  TcpStore({.port = server.port(), .timeout = milliseconds(30'000), .secret = kAbuseSecret})
      .check({"warm"});
  std::this_thread::sleep_for(milliseconds(200));  // the server sees that connection close
  const int fds_before = fds_of(server.pid());
  Figures run{};
  {
    std::unique_ptr<Abuse> abuse = start(server);
    run.rendezvous_ms = static_cast<double>(
        run_rendezvous(server.port(), kRanks, kAbuseSecret, milliseconds(30'000)).count());
    abuse->complete();
    // The ranks closed their connections as the rendezvous ended: let the server see it.
    std::this_thread::sleep_for(milliseconds(200));
    run.held = fds_of(server.pid()) - fds_before;
    run.request_us = request_us(server.port());
  }
  ServerReport report = server.stop();
  run.peak_rss_mib = report.peak_rss_kib / 1024.0;
  run.cpu_ms = static_cast<double>(report.cpu_ms);
  return run;
}

std::string median_spread(std::vector<double> v, int precision) {
  std::sort(v.begin(), v.end());
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.*f [%.*f..%.*f]", precision, v[v.size() / 2], precision,
                v.front(), precision, v.back());
  return buf;
}

TEST(TcpStoreAbuseFigures, DISABLED_RendezvousTimeAndServerMemory) {
  if (net::raise_fd_limit(kIdleConnections + 512).soft < kIdleConnections + 512)
    GTEST_SKIP() << "the hard limit on open files is below " << kIdleConnections + 512;
  const std::vector<std::pair<std::string, StartAbuse>> scenarios = {
      {"no abuse", no_abuse},
      {"10,000 idle connections", idle_connections},
      {"slowloris (1 byte/s)", slowloris},
      {"2^40-byte value announced", huge_value}};
  run_once(no_abuse);  // warm-up, not counted: the first run pays for one-time set-up
  const char* kRow = "%-27s %-20s %-18s %-22s %-18s %-18s\n";
  std::printf(kRow, "case (median [min..max])", "rendezvous ms", "request us", "abusers held",
              "peak RSS MiB", "server CPU ms");
  for (const auto& [name, start] : scenarios) {
    std::vector<double> rendezvous, request, held, rss, cpu;
    for (int i = 0; i < kRuns; ++i) {
      Figures r = run_once(start);
      rendezvous.push_back(r.rendezvous_ms);
      request.push_back(r.request_us);
      held.push_back(r.held);
      rss.push_back(r.peak_rss_mib);
      cpu.push_back(r.cpu_ms);
    }
    std::printf(kRow, name.c_str(), median_spread(rendezvous, 0).c_str(),
                median_spread(request, 1).c_str(), median_spread(held, 0).c_str(),
                median_spread(rss, 1).c_str(), median_spread(cpu, 0).c_str());
    std::fflush(stdout);
  }
  std::printf("opening the 10,000 idle connections took %s ms\n",
              median_spread(flood_ms, 0).c_str());
}

}  // namespace
}  // namespace lockstep::store_test
