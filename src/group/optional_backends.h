// The optional backends, mpi and nccl: libraries of their own (lockstep::mpi, lockstep::nccl) that
// a program links when it wants them, so that a program that does not is free of MPI, CUDA and
// NCCL. The composition root reaches them through weak references, which are null in a program
// that does not link them. Linking a component defines them: its CMake target adds
// -u lockstep_link_<name>_backend to the link, which pulls in the object that defines them.
#pragma once

#include <chrono>
#include <memory>

#include "comm/backend.h"
#include "comm/job_place.h"
#include "lockstep/store/store.h"
#include "p2p/channel.h"

namespace lockstep {

// src/backends/mpi/backend.h
[[gnu::weak]] std::unique_ptr<Backend> make_mpi_backend(const GroupConfig& config);
namespace mpi {
[[gnu::weak]] std::shared_ptr<Store> open_bootstrap_store(const JobPlace& place,
                                                          std::chrono::milliseconds timeout);
}  // namespace mpi
// The byte streams of an mpi group's p2p engine (src/backends/mpi/p2p_channel.h).
[[gnu::weak]] std::unique_ptr<p2p::Channel> make_mpi_p2p_channel(const GroupConfig& config,
                                                                 const Backend& backend);

// src/backends/nccl/backend.h
[[gnu::weak]] std::unique_ptr<Backend> make_nccl_backend(const GroupConfig& config);
[[gnu::weak]] std::unique_ptr<Backend> route_device_buffers_to_nccl(std::unique_ptr<Backend> host,
                                                                    const GroupConfig& config);

}  // namespace lockstep
