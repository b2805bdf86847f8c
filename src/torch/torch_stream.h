// torch's current CUDA stream as lockstep's current-stream source (lockstep/core/current_stream.h),
// so that an op on CUDA memory is ordered after the work torch queued on the stream it considers
// current (a torch.cuda.stream block, autograd's streams). Installed by DDP for CUDA parameters
// and by the Python package. LOCKSTEP_TORCH_CUDA is defined (CMakeLists.txt) when torch is a CUDA
// build; otherwise there are no CUDA tensors, and nothing to install.
#pragma once

#ifdef LOCKSTEP_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "lockstep/core/current_stream.h"

namespace lockstep::torch::detail {

#ifdef LOCKSTEP_TORCH_CUDA
// The calling thread's current stream on cuda:`device` (a cudaStream_t).
inline void* torch_current_cuda_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}
#endif

inline void use_torch_current_stream() {
#ifdef LOCKSTEP_TORCH_CUDA
  set_current_stream_source(&torch_current_cuda_stream);
#endif
}

}  // namespace lockstep::torch::detail
