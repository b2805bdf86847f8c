// [Bucket memory] (src/ddp/bucket_memory.h) on a torch device: DDP's buckets beside its CUDA
// parameters. torch allocates, zeroes and copies them on the current stream, the one the nccl
// backend orders each op after (torch_stream.h), so a collective sees the values written before
// it was issued. Internal to lockstep_torch (ddp.cc).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>

#include "ddp/bucket_memory.h"
#include "tensor_views.h"

namespace lockstep::torch::detail {

class TensorMemory final : public ddp::BucketMemory {
 public:
  // REQUIRES a CPU device, or a CUDA one with its index.
  explicit TensorMemory(at::Device device) : device_(device) {}

  Device device() const override {
    return device_.is_cuda() ? Device::cuda(device_.index()) : Device{};
  }
  std::shared_ptr<std::byte> allocate(size_t bytes) override {
    // torch's allocators align far beyond kBucketAlignment (512 bytes for CUDA's caching one).
    at::Tensor block = at::zeros({static_cast<int64_t>(std::max(bytes, ddp::kBucketAlignment))},
                                 at::TensorOptions().dtype(at::kByte).device(device_));
    auto* data = static_cast<std::byte*>(block.data_ptr());
    return std::shared_ptr<std::byte>(data, [block](std::byte*) mutable { block.reset(); });
  }
  void zero(BufferView slot) override { bytes_of(slot).zero_(); }
  void copy(BufferView dst, ConstBufferView src) override { bytes_of(dst).copy_(bytes_of(src)); }

 private:
  // The slot's bytes as a uint8 tensor (read-only use for a source slot).
  static at::Tensor bytes_of(const ConstBufferView& slot) {
    return tensor_of(BufferView{const_cast<void*>(slot.data), slot.bytes(), DType::u8, slot.device},
                     {static_cast<int64_t>(slot.bytes())});
  }

  at::Device device_;
};

}  // namespace lockstep::torch::detail
