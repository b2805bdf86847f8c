// The few CUDA runtime calls the nccl backend needs, with lockstep errors instead of status codes.
// Host code only: no kernels, no nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

namespace lockstep::nccl {

// Number of CUDA devices this process sees (after CUDA_VISIBLE_DEVICES); 0 when there is no GPU
// or no driver, with the reason in *why ("no CUDA-capable device is detected", ...).
int visible_gpu_count(std::string* why = nullptr);

// Throws Error "<what>: <CUDA's error name and text>" when err is not cudaSuccess.
void check_cuda(cudaError_t err, std::string_view what);

// The PCI bus id of device ("0000:3b:00.0"): the same for every process whatever its
// CUDA_VISIBLE_DEVICES, so it identifies the physical GPU.
std::string pci_bus_id(int device);

// What the memory at p is: "cuda:N" for device (or managed) memory, "host" for anything else.
// Used to check that a buffer tagged Device::cuda(N) really lives there.
std::string memory_location(const void* p);

}  // namespace lockstep::nccl
