// lockstep::rpc from C++ (bench/rpc_compare.py runs it): worker 0 calls worker 1. Prints one line:
// "lockstep rpc c++ p50_us=... p99_us=... pipelined_calls_per_s=... big_MBps=...".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lockstep/rpc/rpc.h"

using namespace lockstep;
using Clock = std::chrono::steady_clock;

int main() {
  const int rank = std::atoi(std::getenv("RANK"));
  rpc::register_function("add", [](const rpc::Call& c) {
    return rpc::Value(c.args.at(0).as_int() + c.args.at(1).as_int());
  });
  rpc::register_function("size", [](const rpc::Call& c) {
    return rpc::Value(static_cast<int64_t>(c.args.at(0).as_tensor().nbytes));
  });
  rpc::init_rpc("worker" + std::to_string(rank));
  if (rank == 0) {
    for (int i = 0; i < 500; ++i) rpc::rpc_sync("worker1", "add", {1, 2});
    std::vector<double> t;
    for (int i = 0; i < 5000; ++i) {
      auto s = Clock::now();
      rpc::rpc_sync("worker1", "add", {1, 2});
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
    }
    std::sort(t.begin(), t.end());
    const int n = 50000;
    auto s = Clock::now();
    std::vector<rpc::Future> futures;
    futures.reserve(n);
    for (int i = 0; i < n; ++i) futures.push_back(rpc::rpc_async("worker1", "add", {i, 1}));
    for (auto& f : futures) f.wait();
    double rate = n / std::chrono::duration<double>(Clock::now() - s).count();
    rpc::Tensor big = rpc::Tensor::zeros(rpc::ElementType::f32, {16 << 20});
    rpc::rpc_sync("worker1", "size", {big});
    const int reps = 5;
    s = Clock::now();
    for (int i = 0; i < reps; ++i) rpc::rpc_sync("worker1", "size", {big});
    double mbps = reps * static_cast<double>(big.nbytes) /
                  std::chrono::duration<double>(Clock::now() - s).count() / 1e6;
    std::printf(
        "lockstep rpc c++ p50_us=%.1f p99_us=%.1f pipelined_calls_per_s=%.0f big_MBps=%.0f\n",
        t[t.size() / 2], t[t.size() * 99 / 100], rate, mbps);
  }
  rpc::shutdown();
}
