#include "backends/nccl/cuda_util.h"

#include "lockstep/core/error.h"

namespace lockstep::nccl {

namespace {

std::string error_text(cudaError_t err) {
  return detail::concat(cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

}  // namespace

int visible_gpu_count(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    if (why) *why = error_text(err);
    return 0;
  }
  if (count == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return count;
}

void check_cuda(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return;
  throw Error(detail::concat(what, ": ", error_text(err)));
}

std::string pci_bus_id(int device) {
  char id[32] = {};
  check_cuda(cudaDeviceGetPCIBusId(id, sizeof id, device),
             detail::concat("cudaDeviceGetPCIBusId(cuda:", device, ")"));
  return id;
}

std::string memory_location(const void* p) {
  cudaPointerAttributes attributes{};
  cudaError_t err = cudaPointerGetAttributes(&attributes, p);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return "host";
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged)
    return "cuda:" + std::to_string(attributes.device);
  return "host";
}

}  // namespace lockstep::nccl
