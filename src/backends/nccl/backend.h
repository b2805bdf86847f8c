// The nccl backend: collectives on CUDA device buffers through NCCL, one communicator and one
// CUDA stream per group (docs/nccl.md). Built only when CUDA and NCCL are found.
#pragma once

#include <memory>

#include "comm/backend.h"

namespace lockstep {

// Defined in backend.cc: the symbol the lockstep::nccl component's link forces in
// (group/optional_backends.h).
extern "C" void lockstep_link_nccl_backend();

// backend "nccl": binds the group to the CUDA device current on the calling thread (set it from
// LOCAL_RANK first) and creates the communicator. Collective over the group, within
// config.timeout. Throws ConfigError when no GPU is visible or when ranks on one host picked one
// device (naming them, the host and the device), TimeoutError naming ranks that never joined.
// Every op then needs buffers on that device (Device::cuda(index)); others are InvalidArgument.
std::unique_ptr<Backend> make_nccl_backend(const GroupConfig& config);

// [Device buffers under auto] Wraps the host backend that auto chose (shm or tcp): ops on host
// buffers and barriers go to it; ops on CUDA buffers go to an nccl backend that the first such op
// creates, on that op's device and within its deadline (so every rank must pass CUDA buffers to
// the same ops). Its name() is the host backend's. Not collective by itself.
std::unique_ptr<Backend> route_device_buffers_to_nccl(std::unique_ptr<Backend> host,
                                                      const GroupConfig& config);

}  // namespace lockstep
