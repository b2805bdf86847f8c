// Sends and recvs go through the group's one front door: each has a flight-recorder entry, as a
// collective has, whichever path moves it (the p2p engine here). Two real processes exchange a
// ring shift, reduce once, leave one recv pending, and end by SIGTERM, which dumps the flight
// recorder (src/debug/signal_dump.h): each dump lists the sends and recvs by name and state.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lockstep/group/init.h"
#include "support/child_mode.h"
#include "support/flight_dumps.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;
using Env = std::map<std::string, std::optional<std::string>>;
using namespace std::chrono_literals;

bool has_dump_of(const fs::path& dir, int rank) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("default-rank" + std::to_string(rank) + "-", 0) == 0)
      return true;
  return false;
}

TEST(P2PRecordChild, DISABLED_Main) {
  auto pg = init_process_group({.backend = std::getenv("TEST_BACKEND")});
  const int peer = 1 - pg->rank();
  std::vector<float> out(1000, static_cast<float>(pg->rank())), in(1000);
  auto s = pg->send(view(out), peer, {.tag = 7});
  pg->recv(view(in), peer, {.tag = 7})->wait();
  s->wait();
  pg->all_reduce(view(in))->wait();  // both ranks are past their p2p ops
  std::printf("CHILD READY %g\n", static_cast<double>(in[0]));
  std::fflush(stdout);
  WorkPtr pending;
  if (pg->rank() == 1) {
    pending = pg->recv(view(in), peer, {.tag = 9});  // nobody sends it: in flight at the dump
  } else {
    const fs::path dir = std::getenv("LOCKSTEP_TRACE_DIR");
    for (int i = 0; i < 3000 && !has_dump_of(dir, 1); ++i) std::this_thread::sleep_for(10ms);
  }
  // The dump thread writes the dump, then ends the process with SIGTERM: wait for it here, as a
  // rank stopped by `lockstep run` is busy elsewhere (returning would destroy the group first).
  ::raise(SIGTERM);
  for (;;) ::pause();
}

const debug::OpRecord* find(const debug::Dump& d, const std::string& op, uint64_t seq) {
  for (const auto& r : d.ops)
    if (r.op == op && r.seq == seq) return &r;
  return nullptr;
}

class P2PRecord : public ::testing::TestWithParam<std::string> {};

TEST_P(P2PRecord, EverySendAndRecvHasAFlightRecorderEntry) {
  TempDir dir;
  const int port = free_port();
  std::vector<Child> children;
  for (int r = 0; r < 2; ++r)
    children.emplace_back(child_argv("P2PRecordChild.DISABLED_Main"),
                          Env{{"RANK", std::to_string(r)},
                              {"WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(port)},
                              {"LOCKSTEP_TRACE_DIR", dir.path()},
                              {"TEST_BACKEND", GetParam()},
                              {"LOCKSTEP_USE_AGENT_STORE", std::nullopt},
                              {"LOCKSTEP_RESTART_COUNT", std::nullopt}});
  std::vector<ProcessResult> results;
  for (Child& child : children) results.push_back(child.wait(60s));
  for (int r = 0; r < 2; ++r) {
    const ProcessResult& res = results[static_cast<size_t>(r)];
    ASSERT_NE(res.output.find("CHILD READY 1"), std::string::npos)
        << "rank " << r << ":\n"
        << res.output << "\nrank " << 1 - r << ":\n"
        << results[static_cast<size_t>(1 - r)].output;
    const debug::Dump d = read_dump(dir.path(), r);
    const int peer = 1 - r;
    const debug::OpRecord* send = find(d, "send", 0);
    const debug::OpRecord* recv = find(d, "recv", 0);
    const debug::OpRecord* pending = find(d, "recv", 1);
    const debug::OpRecord* reduce = find(d, "all_reduce", 0);
    ASSERT_TRUE(send && recv && reduce) << "rank " << r << ": " << d.ops.size() << " ops recorded\n"
                                        << res.output;
    EXPECT_EQ(res.signal, SIGTERM) << res.output;
    EXPECT_EQ(send->peer, peer);
    EXPECT_EQ(send->state, debug::OpState::completed);
    EXPECT_EQ(send->bytes, 4000u);
    EXPECT_EQ(recv->peer, peer);
    EXPECT_EQ(recv->state, debug::OpState::completed);
    EXPECT_GE(recv->ended_us, recv->started_us);
    EXPECT_EQ(reduce->state, debug::OpState::completed);
    // In issue order: the recorder numbers them as the front door takes them.
    EXPECT_LT(send->id, recv->id);
    EXPECT_LT(recv->id, reduce->id);
    if (r == 0) {
      EXPECT_EQ(pending, nullptr);
      continue;
    }
    ASSERT_NE(pending, nullptr);
    EXPECT_EQ(pending->state, debug::OpState::started) << "the recv nobody answered";
    EXPECT_EQ(pending->peer, 0);
    EXPECT_LT(reduce->id, pending->id);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, P2PRecord, ::testing::Values("tcp", "shm"));

}  // namespace
}  // namespace lockstep::testing
