// [Bucket memory] (src/ddp/bucket_memory.h): the host memory, and a reducer whose buckets come
// from memory it is given. Every bucket, slot and received shard must lie in a block of that
// memory, zeroing and moving must go through it, and the averages must still be right.
#include "ddp/bucket_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "ddp/comm_hook.h"
#include "ddp/reducer.h"
#include "harness.h"
#include "lockstep/core/error.h"
#include "support/messages.h"
#include "support/spawn.h"

namespace lockstep::ddp {
namespace {

using lockstep::testing::spawn_groups;
using testing::float_params;
using testing::VectorGrads;

TEST(HostMemory, GivesAlignedZeroFilledBlocksAndZeroesAndCopiesSlots) {
  BucketMemory& memory = host_memory();
  EXPECT_FALSE(memory.device().is_cuda());
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}}) {
    auto block = memory.allocate(bytes);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(block.get()) % kBucketAlignment, 0u) << bytes;
    for (size_t i = 0; i < std::max(bytes, kBucketAlignment); ++i)
      ASSERT_EQ(block.get()[i], std::byte{0}) << bytes << " bytes, byte " << i;
  }
  std::vector<float> a = {1, 2, 3, 4}, b(4, 0);
  memory.copy(view(b), view(a));
  EXPECT_EQ(b, a);
  memory.zero(view(a));
  EXPECT_EQ(a, std::vector<float>(4, 0));
}

// Host memory that keeps a ledger of the blocks it gave out and counts what it was asked to do.
class LedgerMemory final : public BucketMemory {
 public:
  explicit LedgerMemory(Device device = {}) : device_(device) {}
  Device device() const override { return device_; }
  std::shared_ptr<std::byte> allocate(size_t bytes) override {
    auto block = host_memory().allocate(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.push_back({block.get(), std::max(bytes, kBucketAlignment)});
    return block;
  }
  void zero(BufferView slot) override {
    EXPECT_TRUE(owns(slot));
    zeros += 1;
    host_memory().zero(slot);
  }
  void copy(BufferView dst, ConstBufferView src) override {
    EXPECT_TRUE(owns(dst));
    EXPECT_TRUE(owns(BufferView{const_cast<void*>(src.data), src.count, src.dtype, src.device}));
    copies += 1;
    host_memory().copy(dst, src);
  }
  // Whether the whole of `v` lies in one block of the ledger, tagged with this memory's device.
  bool owns(const BufferView& v) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* begin = static_cast<const std::byte*>(v.data);
    for (const auto& [start, size] : blocks_) {
      if (begin >= start && begin + v.bytes() <= start + size) return v.device == device_;
    }
    return false;
  }
  int zeros = 0, copies = 0;

 private:
  Device device_;
  std::mutex mu_;
  std::vector<std::pair<const std::byte*, size_t>> blocks_;
};

// Gradient g[p][i] = (rank + 1) * (p + 1) + i: averages (n + 1) / 2 * (p + 1) + i.
void fill(VectorGrads& g, const std::vector<ParamSpec>& params, int rank) {
  for (size_t p = 0; p < params.size(); ++p) {
    g.grads[p].resize(params[p].count);
    for (size_t i = 0; i < params[p].count; ++i)
      g.grads[p][i] = static_cast<float>((rank + 1) * (p + 1) + i);
  }
}

TEST(ReducerMemory, BucketsSlotsAndTheirMovesAndZeroesAllUseTheGivenMemory) {
  auto params = float_params({8, 8, 8, 8, 8, 8});
  const int world = 2;
  spawn_groups(world, [&](ProcessGroup& pg) {
    LedgerMemory memory;
    VectorGrads grads(params);
    Reducer reducer(params, pg, grads,
                    {.sizes = {.first_bucket_bytes = 64, .bucket_bytes = 64}, .memory = &memory});
    // Rank 0's gradients arrive in an order that rebuilds the buckets after iteration 1.
    std::vector<size_t> order = {1, 0, 3, 2, 5, 4};
    for (int it = 0; it < 2; ++it) {
      fill(grads, params, pg.rank());
      reducer.begin_backward();
      for (size_t p : order) reducer.mark_ready(p);
      reducer.finalize();
      for (size_t p = 0; p < params.size(); ++p) {
        ASSERT_TRUE(memory.owns(reducer.slot(p))) << "iteration " << it << ", parameter " << p;
        for (size_t i = 0; i < params[p].count; ++i)
          ASSERT_FLOAT_EQ(grads.grads[p][i], 1.5f * static_cast<float>(p + 1) + i);
      }
    }
    EXPECT_EQ(reducer.stats().rebuilds, 1);
    EXPECT_EQ(memory.copies, 6);  // each slot moved once, by the memory
    // A joined rank's iteration zeroes every slot through the memory.
    reducer.zero_iteration();
    EXPECT_EQ(memory.zeros, 6);
  });
}

TEST(ReducerMemory, ShardedGradientsAreReceivedIntoTheGivenMemory) {
  auto params = float_params({8, 8, 8, 8});
  spawn_groups(2, [&](ProcessGroup& pg) {
    LedgerMemory memory;
    VectorGrads grads(params);
    Reducer reducer(params, pg, grads, {.memory = &memory});
    reducer.set_gradient_owners({0, 1, 0, 1});
    fill(grads, params, pg.rank());
    reducer.begin_backward();
    for (size_t p = 0; p < params.size(); ++p) reducer.mark_ready(p);
    reducer.finalize();
    for (size_t p = static_cast<size_t>(pg.rank()); p < params.size(); p += 2) {
      for (size_t i = 0; i < params[p].count; ++i)
        ASSERT_FLOAT_EQ(grads.grads[p][i], 1.5f * static_cast<float>(p + 1) + i);
    }
  });
}

TEST(ReducerMemory, SharedBucketsOnADeviceAreRefusedNamingTheDevice) {
  auto params = float_params({8});
  spawn_groups(1, [&](ProcessGroup& pg) {
    LedgerMemory memory(Device::cuda(1));
    VectorGrads grads(params);
    try {
      Reducer reducer(params, pg, grads, {.shared_buckets = true, .memory = &memory});
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(lockstep::testing::contains(e.what(), "cuda:1")) << e.what();
    }
  });
}

TEST(CompressHook, RefusesABucketOnADeviceBeforeTouchingIt) {
  std::vector<float> host(4, 1.0f);
  auto params = float_params({4});
  BucketSpec spec{.dtype = DType::f32, .params = {0}, .offsets = {0}, .count = 4};
  spawn_groups(1, [&](ProcessGroup& pg) {
    BucketRef ref{.index = 3,
                  .buffer = BufferView{host.data(), 4, DType::f32, Device::cuda(0)},
                  .spec = &spec,
                  .params = params};
    try {
      (void)compress_hook({})(pg, ref);
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(lockstep::testing::contains(e.what(), "bucket 3 is on cuda:0")) << e.what();
    }
  });
  EXPECT_EQ(host, std::vector<float>(4, 1.0f));
}

}  // namespace
}  // namespace lockstep::ddp
