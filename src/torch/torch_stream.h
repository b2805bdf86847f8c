// torch's current CUDA stream as lockstep's current-stream source (lockstep/core/current_stream.h),
// so that an op on CUDA memory is ordered after the work torch queued on the stream it considers
// current (a torch.cuda.stream block, autograd's per-device streams). Installed by DDP for CUDA
// parameters and by the Python package. No CUDA headers: c10's device-generic stream interface.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "lockstep/core/current_stream.h"

namespace lockstep::torch::detail {

// The calling thread's current stream on cuda:`device` (a cudaStream_t). Only called for ops on
// CUDA memory, so torch's CUDA support is loaded by then.
inline void* torch_current_cuda_stream(int device) {
  c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  return cuda.getStream(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)))
      .native_handle();
}

inline void use_torch_current_stream() {
  set_current_stream_source(&torch_current_cuda_stream);
}

}  // namespace lockstep::torch::detail
