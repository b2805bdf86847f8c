// [Stream order] (src/backends/nccl/stream_order.h) without a GPU: a recording StreamApi stands
// in for the CUDA runtime, which this machine may lack, and the tests check the logic: the
// event is recorded on the current stream of the op's device, with that device current, the
// caller's device comes back, the backend's stream waits on that very event, and the event is
// destroyed once, when the last holder lets go, failures included. On a GPU,
// NcclProbe.StreamOrderAfterTheCallersDeviceWork checks the real thing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/nccl/stream_order.h"
#include "lockstep/core/current_stream.h"
#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::nccl {
namespace {

// Stream and event handles are opaque pointers: fake ones are distinct addresses never
// dereferenced.
cudaStream_t fake_stream(uintptr_t n) {
  return reinterpret_cast<cudaStream_t>(0x1000 + n);
}
cudaEvent_t fake_event(uintptr_t n) {
  return reinterpret_cast<cudaEvent_t>(0x2000 + n);
}

class RecordingStreams final : public StreamApi {
 public:
  std::vector<std::string> calls;
  int device = 0;
  cudaError_t fail_record = cudaSuccess;
  int events_made = 0;
  int events_destroyed = 0;

  cudaError_t use_device(int d, int* previous) override {
    *previous = device;
    device = d;
    calls.push_back("use_device " + std::to_string(d));
    return cudaSuccess;
  }
  cudaStream_t current_stream(int d) override {
    calls.push_back("current_stream " + std::to_string(d) + " with device " +
                    std::to_string(device) + " current");
    return fake_stream(static_cast<uintptr_t>(d));
  }
  cudaError_t create_event(cudaEvent_t* event) override {
    *event = fake_event(static_cast<uintptr_t>(events_made++));
    calls.push_back("create_event");
    return cudaSuccess;
  }
  cudaError_t record(cudaEvent_t event, cudaStream_t stream) override {
    calls.push_back("record " + name(event) + " on " + name(stream));
    return fail_record;
  }
  cudaError_t wait(cudaStream_t stream, cudaEvent_t event) override {
    calls.push_back("wait " + name(stream) + " on " + name(event));
    return cudaSuccess;
  }
  cudaError_t destroy_event(cudaEvent_t event) override {
    ++events_destroyed;
    calls.push_back("destroy " + name(event));
    return cudaSuccess;
  }

  static std::string name(cudaStream_t s) {
    return "stream" + std::to_string(reinterpret_cast<uintptr_t>(s) - 0x1000);
  }
  static std::string name(cudaEvent_t e) {
    return "event" + std::to_string(reinterpret_cast<uintptr_t>(e) - 0x2000);
  }
};

TEST(NcclStreamOrder, TheEventIsRecordedOnTheOpsDevicesCurrentStreamAndTheCallersDeviceReturns) {
  RecordingStreams api;
  api.device = 0;  // the caller's thread has cuda:0 current; the op's buffers are on cuda:3
  auto mark = mark_issue(api, 3, "all_reduce #0 on rank 1");
  ASSERT_NE(mark, nullptr);
  EXPECT_EQ(api.calls, (std::vector<std::string>{"use_device 3", "create_event",
                                                 "current_stream 3 with device 3 current",
                                                 "record event0 on stream3", "use_device 0"}));
  EXPECT_EQ(api.device, 0);
}

TEST(NcclStreamOrder, TheBackendStreamWaitsOnThatEventWhichDiesWithItsLastHolder) {
  RecordingStreams api;
  auto mark = mark_issue(api, 0, "all_reduce #0 on rank 0");
  api.calls.clear();
  order_after_issue(api, mark, fake_stream(7), "all_reduce #0");
  EXPECT_EQ(api.calls, (std::vector<std::string>{"wait stream7 on event0"}));
  auto copy = mark;  // the op's copy on the progress thread
  mark.reset();
  EXPECT_EQ(api.events_destroyed, 0) << "destroyed while an op still held it";
  copy.reset();
  EXPECT_EQ(api.events_destroyed, 1);
  EXPECT_EQ(api.calls.back(), "destroy event0");
}

TEST(NcclStreamOrder, AnOpWithoutAMarkWaitsOnNothing) {
  RecordingStreams api;
  order_after_issue(api, nullptr, fake_stream(1), "all_gather #4");
  EXPECT_TRUE(api.calls.empty());
}

TEST(NcclStreamOrder, AFailedRecordNamesTheOpFreesTheEventAndRestoresTheDevice) {
  RecordingStreams api;
  api.device = 1;
  api.fail_record = cudaErrorInvalidResourceHandle;
  try {
    (void)mark_issue(api, 2, "broadcast #9 on rank 2");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(testing::contains(e.what(), "broadcast #9 on rank 2")) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "caller's current stream")) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "cudaErrorInvalidResourceHandle")) << e.what();
  }
  EXPECT_EQ(api.events_made, 1);
  EXPECT_EQ(api.events_destroyed, 1);
  EXPECT_EQ(api.device, 1);
}

// The default source is the legacy default stream, which CUDA orders after every blocking
// stream of the device; a framework can install its own, and null restores the default.
void* framework_stream(int device) {
  return fake_stream(100 + static_cast<uintptr_t>(device));
}

TEST(NcclStreamOrder, TheCurrentStreamDefaultsToTheLegacyStreamAndCanBeReplaced) {
  StreamApi& api = cuda_stream_api();
  EXPECT_EQ(api.current_stream(0), cudaStreamLegacy);
  set_current_stream_source(&framework_stream);
  EXPECT_EQ(api.current_stream(2), fake_stream(102));
  set_current_stream_source(nullptr);
  EXPECT_EQ(api.current_stream(2), cudaStreamLegacy);
}

}  // namespace
}  // namespace lockstep::nccl
