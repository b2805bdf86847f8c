// [Stream order] How an op is ordered after the GPU work that produced its data (docs/nccl.md,
// "Stream contract").
//
// The backend's stream is non-blocking, so nothing orders it after the caller's streams by
// itself: a kernel or a pageable host-to-device copy still running when the NCCL call starts
// would race it and give silently wrong data. So, as PyTorch does ("[Sync Streams]"):
//   1. on the caller's thread, when the op is issued, an event is recorded on the caller's
//      current stream (mark_issue);
//   2. on the progress thread, before the op's first NCCL call, the backend's stream waits on
//      that event (order_after_issue), on the device, without blocking the host.
// The caller's "current stream" comes from lockstep::current_stream_source()
// (lockstep/core/current_stream.h): by default the legacy default stream, which CUDA orders after
// every blocking stream of the device, per-thread default streams included, so work on stream 0
// and on cudaStreamPerThread is covered. LibTorch and the Python package install torch's.
//
// The CUDA calls sit behind StreamApi so that the logic above is tested without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string_view>

namespace lockstep::nccl {

// The CUDA runtime calls of stream ordering. Implementations return CUDA's status.
class StreamApi {
 public:
  virtual ~StreamApi() = default;
  // Makes device current on the calling thread; *previous gets the one that was.
  virtual cudaError_t use_device(int device, int* previous) = 0;
  // The stream the calling thread's work goes to on `device` (see the header comment).
  virtual cudaStream_t current_stream(int device) = 0;
  virtual cudaError_t create_event(cudaEvent_t* event) = 0;
  virtual cudaError_t record(cudaEvent_t event, cudaStream_t stream) = 0;
  virtual cudaError_t wait(cudaStream_t stream, cudaEvent_t event) = 0;
  virtual cudaError_t destroy_event(cudaEvent_t event) = 0;
};

// The real calls (cudaEventCreateWithFlags without timing, cudaEventRecord,
// cudaStreamWaitEvent, cudaEventDestroy) and the installed current-stream source.
StreamApi& cuda_stream_api();

// Step 1, on the caller's thread: an event recorded on the current stream of `device` (made
// current for the call, then the caller's device is restored).
// The returned handle destroys the event when the op lets go of it (after step 2 has queued its
// wait: CUDA keeps a waited-on event alive). Throws Error naming `what` on a CUDA failure.
std::shared_ptr<void> mark_issue(StreamApi& api, int device, std::string_view what);

// Step 2, on the progress thread: `stream` waits on the event of mark (null: nothing to wait
// for, as for the fingerprint exchange's own ops). Throws Error naming `what`.
void order_after_issue(StreamApi& api, const std::shared_ptr<void>& mark, cudaStream_t stream,
                       std::string_view what);

}  // namespace lockstep::nccl
