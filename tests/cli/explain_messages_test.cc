// `lockstep explain` recognises lockstep's own errors as the code words them today: each test
// provokes a real failure (ranks as threads over a HashStore, real sockets, the real launcher),
// writes the error text into a log, and checks which signature `lockstep explain` ranks first.
// A reworded message that the signatures no longer match fails here.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "ddp/model_check.h"
#include "group/rendezvous_env.h"
#include "lockstep/core/buffer.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "net/socket.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

// The id of the first finding `lockstep explain` prints for `log_text` (or its whole output
// when it found nothing).
std::string first_signature(const std::string& log_text) {
  ScratchDir dir;
  write_text(dir.file("run.log"), log_text);
  ProcessResult r = run_lockstep({"explain", dir.file("run.log")},
                                 {{"LOCKSTEP_EXPLAIN_SIGNATURES", std::nullopt}});
  const std::string marker = "\n   signature ";
  size_t at = r.output.find(marker);
  if (r.exit_code != 0 || at == std::string::npos) return "(none) " + r.output;
  std::string id = r.output.substr(at + marker.size());
  return id.substr(0, id.find_first_of(",\n"));
}

// Runs fn on 2 ranks (threads) and returns every rank's error message, one per line.
std::string errors_of(const std::function<void(ProcessGroup&)>& fn, const std::string& backend) {
  std::mutex mu;
  std::string log;
  spawn_groups(
      2,
      [&](ProcessGroup& pg) {
        try {
          fn(pg);
        } catch (const Error& e) {
          std::lock_guard<std::mutex> lock(mu);
          log += "[rank " + std::to_string(pg.rank()) + "] lockstep: error: " + e.what() + "\n";
        }
      },
      backend, 20s);
  return log;
}

// Parameter: the backend.
class ExplainLockstepErrors : public ::testing::TestWithParam<std::string> {
 protected:
  // Runs fn on 2 ranks and expects their errors to be explained as signature `id` first.
  void expect_explained_as(const std::string& id, const std::function<void(ProcessGroup&)>& fn) {
    std::string log = errors_of(fn, GetParam());
    ASSERT_FALSE(log.empty()) << "no rank failed";
    EXPECT_EQ(first_signature(log), id) << log;
  }
};

TEST_P(ExplainLockstepErrors, DifferentCounts) {
  expect_explained_as("lockstep-size-mismatch", [](ProcessGroup& pg) {
    const size_t count = pg.rank() == 0 ? 16 : 8;
    std::vector<float> in(count, 1.0f), out(2 * count);
    pg.all_gather(view(in), view(out))->wait();
  });
}

TEST_P(ExplainLockstepErrors, DifferentOrder) {
  expect_explained_as("lockstep-order-mismatch", [](ProcessGroup& pg) {
    std::vector<float> data(4, 1.0f);
    if (pg.rank() == 0)
      pg.all_reduce(view(data))->wait();
    else
      pg.broadcast(view(data))->wait();
  });
}

TEST_P(ExplainLockstepErrors, DifferentReduceOp) {
  expect_explained_as("lockstep-argument-mismatch", [](ProcessGroup& pg) {
    std::vector<float> data(4, 1.0f);
    pg.all_reduce(view(data), {.op = pg.rank() == 0 ? ReduceOp::sum : ReduceOp::max})->wait();
  });
}

TEST_P(ExplainLockstepErrors, RankThatNeverEntersTheOp) {
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  expect_explained_as("lockstep-collective-timeout", [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      done.wait();  // stays in the group, but never enters the op
      return;
    }
    std::vector<float> data(4, 1.0f);
    try {
      pg.all_reduce(view(data), {.timeout = 500ms})->wait();
    } catch (...) {
      rank0_done.set_value();
      throw;
    }
    rank0_done.set_value();
  });
}

TEST_P(ExplainLockstepErrors, ModelThatDiffers) {
  expect_explained_as("lockstep-model-differs", [](ProcessGroup& pg) {
    std::vector<ddp::ParamShape> params = {{"fc.weight", "float", {10, pg.rank() == 0 ? 64 : 32}}};
    ddp::verify_same_parameters(pg, params, "DistributedDataParallel", 10s);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ExplainLockstepErrors, ::testing::Values("tcp", "shm"));

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string("lockstep: error: ") + e.what() + "\n";
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ExplainLockstepSetupErrors, IncompleteEnvironment) {
  EnvLookup env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "RANK") return "3";
    if (name == "WORLD_SIZE") return "2";
    return std::nullopt;
  };
  std::string log = message_of([&] { read_rendezvous(InitOptions{}, env); });
  EXPECT_EQ(first_signature(log), "lockstep-environment") << log;
}

TEST(ExplainLockstepSetupErrors, PortInUse) {
  net::Fd holder = net::listen_tcp("0.0.0.0", 0);
  const uint16_t port = net::local_port(holder.get());
  std::string log = message_of([&] { net::listen_tcp("0.0.0.0", port); });
  EXPECT_EQ(first_signature(log), "lockstep-port-in-use") << log;
}

TEST(ExplainLockstepSetupErrors, MasterNotListening) {
  const int port = free_port();
  std::string log = message_of([&] {
    net::connect_tcp("127.0.0.1", static_cast<uint16_t>(port), Deadline::after(300ms), false);
  });
  EXPECT_EQ(first_signature(log), "lockstep-master-unreachable") << log;
}

TEST(ExplainLockstepSetupErrors, UnresolvableMaster) {
  std::string log = message_of(
      [&] { net::connect_tcp("nonexistent-host.invalid", 29500, Deadline::after(300ms), false); });
  EXPECT_EQ(first_signature(log), "lockstep-unresolvable-host") << log;
}

TEST(ExplainLockstepSetupErrors, RankThatNeverJoins) {
  std::string log = message_of([&] {
    init_process_group(
        {.rank = 0, .world_size = 2, .store = std::make_shared<HashStore>(), .timeout = 300ms});
  });
  EXPECT_EQ(first_signature(log), "lockstep-ranks-never-joined") << log;
}

TEST(ExplainLockstepSetupErrors, StoreKeyNeverSet) {
  HashStore store;
  std::string log = message_of([&] { store.get("epoch/done", 100ms); });
  EXPECT_EQ(first_signature(log), "lockstep-store-timeout") << log;
}

TEST(ExplainLockstepSetupErrors, LauncherReportsASigkilledRank) {
  ProcessResult run = run_lockstep(
      {"run", "--standalone", "--nproc-per-node", "1", "--", "/bin/sh", "-c", "kill -9 $$"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(first_signature(run.output), "lockstep-launcher-sigkill") << run.output;
}

}  // namespace
}  // namespace lockstep::testing
