// [Fused p2p] (src/group/progress_queue.h): for a backend whose sends and recvs must progress
// together (nccl), the progress queue hands every run of sends and recvs queued back to back to
// run_p2p_group at once, batches from push_group included, and completes or fails all of their
// Works together. The backend here records what it is handed; the nccl backend's own grouping
// (one ncclGroupStart/End) runs on a GPU in NcclProbe.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "comm/backend.h"
#include "group/progress_queue.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::testing {
namespace {

// Records each call; the first run() waits until open() so that the test can queue ops behind it.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(bool fuses) : fuses_(fuses) {}
  const std::string& name() const override { return name_; }
  void run(const Op& op) override {
    wait_open();
    record("run " + op.name());
  }
  bool fuses_p2p(const Op& op) const override {
    return fuses_ && (op.kind == OpKind::send || op.kind == OpKind::recv);
  }
  void run_p2p_group(std::span<const Op> ops) override {
    wait_open();
    std::string line = "group";
    for (const Op& op : ops) line += " [" + op.name() + "]";
    record(line);
    if (fail_groups) throw NetworkError("peer gone in " + ops.front().name());
  }
  void abort(const std::string& /*reason*/) override {}
  void shutdown(Deadline /*deadline*/) override {}

  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  bool fail_groups = false;

 private:
  void wait_open() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void record(std::string line) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(line));
  }
  const std::string name_ = "recording";
  const bool fuses_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::vector<std::string> calls_;
};

Op p2p(OpKind kind, int peer, uint64_t seq) {
  return Op{.kind = kind,
            .seq = seq,
            .peer = peer,
            .count = 1,
            .deadline = Deadline::after(std::chrono::seconds(10))};
}
Op collective(uint64_t seq) {
  return Op{.kind = OpKind::all_reduce,
            .seq = seq,
            .count = 1,
            .deadline = Deadline::after(std::chrono::seconds(10))};
}

TEST(P2PFusion, SendsAndRecvsQueuedBackToBackRunAsOneGroupBetweenCollectives) {
  RecordingBackend backend(true);
  std::vector<WorkPtr> works;
  {
    ProgressQueue queue(backend);
    works.push_back(queue.push(collective(0)));  // blocks the thread until open()
    works.push_back(queue.push(p2p(OpKind::send, 1, 0)));
    works.push_back(queue.push(p2p(OpKind::recv, 1, 0)));
    works.push_back(queue.push(p2p(OpKind::recv, 2, 0)));
    works.push_back(queue.push(collective(1)));
    works.push_back(queue.push(p2p(OpKind::send, 2, 0)));
    backend.open();
    for (auto& w : works) w->wait();
  }
  EXPECT_EQ(backend.calls(),
            (std::vector<std::string>{
                "run all_reduce #0",
                "group [send #0 to rank 1] [recv #0 from rank 1] [recv #0 from rank 2]",
                "run all_reduce #1", "group [send #0 to rank 2]"}));
}

TEST(P2PFusion, ABatchJoinsTheSingleOpsNextToItAndEachKeepsItsWork) {
  RecordingBackend backend(true);
  ProgressQueue queue(backend);
  auto first = queue.push(collective(0));
  auto single = queue.push(p2p(OpKind::send, 1, 0));
  auto batch = queue.push_group({p2p(OpKind::recv, 1, 0), p2p(OpKind::send, 1, 1)},
                                "batch_isend_irecv #0 (2 sends and recvs)");
  backend.open();
  first->wait();
  single->wait();
  batch->wait();
  EXPECT_EQ(backend.calls(),
            (std::vector<std::string>{
                "run all_reduce #0",
                "group [send #0 to rank 1] [recv #0 from rank 1] [send #1 to rank 1]"}));
}

TEST(P2PFusion, ABackendThatDoesNotFuseRunsEachOpAlone) {
  RecordingBackend backend(false);
  ProgressQueue queue(backend);
  auto a = queue.push(p2p(OpKind::send, 1, 0));
  auto b = queue.push(p2p(OpKind::recv, 1, 0));
  backend.open();
  a->wait();
  b->wait();
  EXPECT_EQ(backend.calls(),
            (std::vector<std::string>{"run send #0 to rank 1", "run recv #0 from rank 1"}));
}

TEST(P2PFusion, AFailedGroupFailsEveryWorkInItWithTheSameClassAndBreaksTheQueue) {
  RecordingBackend backend(true);
  backend.fail_groups = true;
  ProgressQueue queue(backend);
  auto gate = queue.push(collective(0));
  auto a = queue.push(p2p(OpKind::send, 1, 0));
  auto b = queue.push_group({p2p(OpKind::recv, 1, 0)}, "batch_isend_irecv #0 (1 sends and recvs)");
  backend.open();
  gate->wait();
  EXPECT_THROW(a->wait(), NetworkError);
  try {
    b->wait();
    FAIL() << "expected NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_TRUE(contains(e.what(), "peer gone in send #0 to rank 1")) << e.what();
  }
  auto later = queue.push(collective(1));
  try {
    later->wait();
    FAIL() << "expected NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_TRUE(contains(e.what(), "all_reduce #1: not run, because the group broke at send #0"))
        << e.what();
  }
  EXPECT_TRUE(queue.broken());
}

}  // namespace
}  // namespace lockstep::testing
