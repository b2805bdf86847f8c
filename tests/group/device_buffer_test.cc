// The device tag of buffer views at the ProcessGroup front end: host-only backends refuse CUDA
// buffers, and input and output must be on one device. Refusals happen before any
// communication, so the group stays usable. No GPU needed: nothing touches the memory.
#include <gtest/gtest.h>

#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::testing {
namespace {

TEST(DeviceBuffer, DefaultViewsAreHostMemory) {
  std::vector<float> v(4);
  EXPECT_EQ(view(v).device, Device{});
  EXPECT_FALSE(view(v).device.is_cuda());
  EXPECT_EQ(ConstBufferView(view(v)).device, Device{});
  BufferView tagged{v.data(), v.size(), DType::f32, Device::cuda(3)};
  EXPECT_EQ(ConstBufferView(tagged).device, Device::cuda(3));
  EXPECT_EQ(device_name(tagged.device), "cuda:3");
  EXPECT_EQ(device_name(Device{}), "cpu");
}

TEST(DeviceBuffer, HostBackendRefusesCudaBuffersAndStaysUsable) {
  spawn_groups(
      2,
      [](ProcessGroup& pg) {
        std::vector<float> v(8, 1.0f);
        BufferView tagged{v.data(), v.size(), DType::f32, Device::cuda(1)};
        try {
          (void)pg.broadcast(tagged);
          FAIL() << "expected InvalidArgument";
        } catch (const InvalidArgument& e) {
          EXPECT_TRUE(contains(
              e.what(), "broadcast: rank " + std::to_string(pg.rank()) + " passed a cuda:1 buffer"))
              << e.what();
          EXPECT_TRUE(contains(e.what(), "backend 'tcp' moves host memory only")) << e.what();
        }
        pg.all_reduce(view(v))->wait();
        EXPECT_EQ(v[7], 2.0f);
      },
      "tcp");
}

TEST(DeviceBuffer, InputAndOutputOnDifferentDevicesAreRefused) {
  spawn_groups(
      2,
      [](ProcessGroup& pg) {
        std::vector<float> in(4, 1.0f), out(8);
        ConstBufferView on_gpu(in.data(), in.size(), DType::f32, Device::cuda(0));
        try {
          (void)pg.all_gather(on_gpu, view(out));
          FAIL() << "expected InvalidArgument";
        } catch (const InvalidArgument& e) {
          EXPECT_TRUE(contains(e.what(), "all_gather: input is on cuda:0 but output is on cpu"))
              << e.what();
        }
        pg.all_gather(view(in), view(out))->wait();
        EXPECT_EQ(out, std::vector<float>(8, 1.0f));
      },
      "tcp");
}

}  // namespace
}  // namespace lockstep::testing
