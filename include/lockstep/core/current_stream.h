// The caller's current CUDA stream, as the framework that calls lockstep defines it. The nccl
// backend orders each op on CUDA buffers after the work already queued there (docs/nccl.md,
// "Stream contract"). Without a source, that is the legacy default stream (stream 0), which CUDA
// orders after every blocking stream of the device. LibTorch and the Python package install
// torch's current stream (c10's getCurrentCUDAStream) when they first see a CUDA tensor.
//
// Declared without CUDA's headers, so that code built without CUDA can call it: the source
// returns a cudaStream_t as void*. Without the nccl backend the setting is kept and unused.
#pragma once

namespace lockstep {

// Returns the calling thread's current stream (a cudaStream_t) on CUDA device `device`.
using CurrentStreamSource = void* (*)(int device);

// Installs `source` for every group of this process; null restores the legacy default stream.
// Thread-safe; ops issued after it returns use the new source.
void set_current_stream_source(CurrentStreamSource source);

// The installed source, or null.
CurrentStreamSource current_stream_source();

}  // namespace lockstep
