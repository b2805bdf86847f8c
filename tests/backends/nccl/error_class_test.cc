// NCCL's results become lockstep error classes (nccl_error_class) and keep them on the way
// through the group's progress queue to the caller's Work and to every later op: ncclRemoteError
// is a NetworkError there, ncclTimeout a TimeoutError. No GPU needed: the error is raised as the
// backend raises it, by class (comm/failure.h).
#include <gtest/gtest.h>

#include <typeinfo>

#include "backends/nccl/nccl_types.h"
#include "comm/backend.h"
#include "group/progress_queue.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::nccl {
namespace {

TEST(NcclErrors, EveryResultHasAClass) {
  EXPECT_EQ(nccl_error_class(ncclRemoteError), ErrorClass::network);
  EXPECT_EQ(nccl_error_class(ncclSystemError), ErrorClass::network);
  EXPECT_EQ(nccl_error_class(static_cast<ncclResult_t>(kNcclTimeout)), ErrorClass::timeout);
  EXPECT_EQ(nccl_error_class(ncclInvalidArgument), ErrorClass::invalid_argument);
  EXPECT_EQ(nccl_error_class(ncclInvalidUsage), ErrorClass::invalid_argument);
  EXPECT_EQ(nccl_error_class(ncclUnhandledCudaError), ErrorClass::other);
  EXPECT_EQ(nccl_error_class(ncclInternalError), ErrorClass::other);
  EXPECT_EQ(nccl_error_class(static_cast<ncclResult_t>(42)), ErrorClass::other);
}

TEST(NcclErrors, TheErrorTableNamesNcclTimeout) {
  std::string text = nccl_error_text(static_cast<ncclResult_t>(kNcclTimeout), nullptr);
  EXPECT_EQ(text.rfind("ncclTimeout (an NCCL operation timed out)", 0), 0u) << text;
  for (int r = 0; r <= kNcclTimeout; ++r)
    EXPECT_EQ(nccl_error_text(static_cast<ncclResult_t>(r), nullptr).rfind("ncclResult", 0),
              std::string::npos)
        << r << " has no name in the table";
}

// Runs an op whose backend fails with NCCL result r, then one more op; returns the dynamic
// types both Works raised.
class NcclFailingBackend final : public Backend {
 public:
  explicit NcclFailingBackend(ncclResult_t r) : r_(r) {}
  const std::string& name() const override { return name_; }
  void run(const Op& op) override {
    throw_as(nccl_error_class(r_),
             op.name() + " on rank 0: ncclAllReduce failed: " + nccl_error_text(r_, nullptr));
  }
  void abort(const std::string& /*reason*/) override {}
  void shutdown(Deadline /*deadline*/) override {}

 private:
  const std::string name_ = "nccl";
  ncclResult_t r_;
};

std::pair<std::string, std::string> types_raised(ncclResult_t r) {
  NcclFailingBackend backend(r);
  ProgressQueue queue(backend);
  auto type_of = [](const WorkPtr& w) -> std::string {
    try {
      w->wait();
    } catch (const std::exception& e) {
      return typeid(e).name();
    }
    return "nothing";
  };
  auto first = queue.push(Op{.kind = OpKind::all_reduce, .seq = 0});
  auto second = queue.push(Op{.kind = OpKind::all_reduce, .seq = 1});
  return {type_of(first), type_of(second)};
}

TEST(NcclErrors, ClassesReachTheCallerAndTheOpsAfterThroughTheProgressQueue) {
  const std::string network = typeid(NetworkError).name();
  const std::string timeout = typeid(TimeoutError).name();
  const std::string invalid = typeid(InvalidArgument).name();
  const std::string error = typeid(Error).name();
  EXPECT_EQ(types_raised(ncclRemoteError), std::make_pair(network, network));
  EXPECT_EQ(types_raised(ncclSystemError), std::make_pair(network, network));
  EXPECT_EQ(types_raised(static_cast<ncclResult_t>(kNcclTimeout)),
            std::make_pair(timeout, timeout));
  EXPECT_EQ(types_raised(ncclInvalidUsage), std::make_pair(invalid, invalid));
  EXPECT_EQ(types_raised(ncclInternalError), std::make_pair(error, error));
}

}  // namespace
}  // namespace lockstep::nccl
