// Helpers for the nccl tests: GPU requirements that skip with a reason, device copies of
// TypedBuffers, and ranks as threads that each own one GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "backends/nccl/cuda_util.h"
#include "lockstep/group/init.h"
#include "lockstep/store/hash_store.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "support/typed_buffer.h"

// Skips the test, saying why, unless this process sees at least n CUDA devices.
#define LOCKSTEP_REQUIRE_GPUS(n)                                                       \
  do {                                                                                 \
    std::string why_;                                                                  \
    int have_ = ::lockstep::nccl::visible_gpu_count(&why_);                            \
    if (have_ < (n))                                                                   \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s); this machine has " << have_ \
                   << (have_ == 0 ? " (" + why_ + ")" : std::string());                \
  } while (0)

namespace lockstep::testing {

inline int gpu_count() {
  return nccl::visible_gpu_count();
}

// A device copy of a TypedBuffer on one GPU: upload() sends the host values, download() brings
// the device values back into the host buffer.
class DeviceBuffer {
 public:
  DeviceBuffer(TypedBuffer& host, int device) : host_(host), device_(device) {
    nccl::check_cuda(cudaSetDevice(device), "cudaSetDevice");
    nccl::check_cuda(cudaMalloc(&data_, bytes() + 1), "cudaMalloc");
    upload();
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void upload() {
    nccl::check_cuda(cudaMemcpy(data_, host_.view().data, bytes(), cudaMemcpyHostToDevice),
                     "cudaMemcpy to device");
  }
  void download() {
    nccl::check_cuda(cudaMemcpy(host_.view().data, data_, bytes(), cudaMemcpyDeviceToHost),
                     "cudaMemcpy to host");
  }
  BufferView view() { return slice(0, host_.count()); }
  BufferView slice(size_t offset, size_t n) {
    DType t = host_.view().dtype;
    return BufferView{static_cast<char*>(data_) + offset * element_size(t), n, t,
                      Device::cuda(device_)};
  }

 private:
  size_t bytes() const { return host_.view().bytes(); }
  TypedBuffer& host_;
  int device_;
  void* data_ = nullptr;
};

// Runs fn(group, device) on `size` threads, rank r on GPU `device_of(r)` (default: r), each with
// its own group over one HashStore. Rethrows the first exception.
inline void spawn_gpu_groups(
    int size, const std::string& backend, const std::function<void(ProcessGroup&, int)>& fn,
    std::chrono::milliseconds timeout = std::chrono::seconds(60),
    const std::function<int(int)>& device_of = [](int r) { return r; }) {
  auto store = std::make_shared<HashStore>();
  spawn(size, [&](int rank) {
    int device = device_of(rank);
    nccl::check_cuda(cudaSetDevice(device), "cudaSetDevice");
    auto pg = init_process_group(
        {.backend = backend, .rank = rank, .world_size = size, .store = store, .timeout = timeout});
    fn(*pg, device);
  });
}

// World sizes to test on this machine: 1, 2, 3 and every GPU, as far as there are GPUs.
inline std::vector<int> gpu_world_sizes() {
  std::vector<int> sizes;
  int gpus = gpu_count();
  for (int n : {1, 2, 3, gpus})
    if (n >= 1 && n <= gpus && (sizes.empty() || n > sizes.back())) sizes.push_back(n);
  return sizes;
}

}  // namespace lockstep::testing
