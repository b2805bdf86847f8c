#include "backends/nccl/stream_order.h"

#include <functional>

#include "backends/nccl/cuda_util.h"
#include "lockstep/core/current_stream.h"
#include "lockstep/core/error.h"

namespace lockstep::nccl {

namespace {

class CudaStreamApi final : public StreamApi {
 public:
  cudaError_t use_device(int device, int* previous) override {
    cudaError_t err = cudaGetDevice(previous);
    if (err != cudaSuccess || *previous == device) return err;
    return cudaSetDevice(device);
  }
  cudaStream_t current_stream(int device) override {
    CurrentStreamSource source = current_stream_source();
    return source != nullptr ? static_cast<cudaStream_t>(source(device)) : cudaStreamLegacy;
  }
  cudaError_t create_event(cudaEvent_t* event) override {
    // No timing: a timing event costs more to record and is never read here.
    return cudaEventCreateWithFlags(event, cudaEventDisableTiming);
  }
  cudaError_t record(cudaEvent_t event, cudaStream_t stream) override {
    return cudaEventRecord(event, stream);
  }
  cudaError_t wait(cudaStream_t stream, cudaEvent_t event) override {
    return cudaStreamWaitEvent(stream, event, 0);
  }
  cudaError_t destroy_event(cudaEvent_t event) override { return cudaEventDestroy(event); }
};

}  // namespace

StreamApi& cuda_stream_api() {
  static CudaStreamApi api;
  return api;
}

std::shared_ptr<void> mark_issue(StreamApi& api, int device, std::string_view what) {
  int previous = device;
  check_cuda(api.use_device(device, &previous), detail::concat(what, ": cudaSetDevice"));
  // The caller's device comes back however this ends.
  std::unique_ptr<StreamApi, std::function<void(StreamApi*)>> restore(
      &api, [previous, device](StreamApi* a) {
        int ignored = 0;
        if (previous != device) a->use_device(previous, &ignored);
      });
  cudaEvent_t event = nullptr;
  check_cuda(api.create_event(&event), detail::concat(what, ": cudaEventCreate"));
  // Owned from here on, so that a failed record does not leak it.
  std::shared_ptr<void> mark(event,
                             [&api](void* e) { api.destroy_event(static_cast<cudaEvent_t>(e)); });
  check_cuda(api.record(event, api.current_stream(device)),
             detail::concat(what, ": cudaEventRecord on the caller's current stream"));
  return mark;
}

void order_after_issue(StreamApi& api, const std::shared_ptr<void>& mark, cudaStream_t stream,
                       std::string_view what) {
  if (!mark) return;
  check_cuda(api.wait(stream, static_cast<cudaEvent_t>(mark.get())),
             detail::concat(what,
                            ": cudaStreamWaitEvent (ordering the op after the caller's "
                            "current stream)"));
}

}  // namespace lockstep::nccl
