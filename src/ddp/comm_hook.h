// Bucket hooks of the DDP reducer: how one flat bucket of gradients is averaged over the group.
// The framework-agnostic form of lockstep/torch/comm_hooks.h (which wraps these).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <span>

#include "ddp/bucket_plan.h"
#include "lockstep/core/buffer.h"
#include "lockstep/group/process_group.h"

namespace lockstep::ddp {

// One bucket at launch. Valid during the hook call; `buffer` stays valid (and must hold the
// average) until the returned finish step has run.
struct BucketRef {
  size_t index = 0;
  bool is_last = false;
  BufferView buffer;
  const BucketSpec* spec = nullptr;   // its parameters and their offsets
  std::span<const ParamSpec> params;  // every parameter of the reducer, by index
};

// The communication in flight, and what to do once it has completed (on the backward thread,
// after work->wait()). Either may be empty.
struct PendingReduction {
  WorkPtr work;
  std::function<void()> finish;
};

// Starts averaging bucket.buffer over the group. Called in bucket order on the backward thread;
// must issue the same collectives on every rank; must keep alive what its Work uses.
using BucketHook = std::function<PendingReduction(ProcessGroup& group, const BucketRef& bucket)>;

// all_reduce(buffer, avg) in place, within `timeout`.
BucketHook average_hook(std::chrono::milliseconds timeout);

struct CompressHookOptions {
  DType wire = DType::f16;        // f16 or bf16
  bool divide_before_sum = true;  // scale by 1/size, then sum (no f16 overflow); else avg
  std::chrono::milliseconds timeout = kGroupTimeout;
};

// Narrows f32 and f64 buckets to options.wire, all_reduces that, and widens the result back in
// the finish step. Buckets already 16-bit are averaged as they are. Keeps one scratch buffer per
// bucket (owned by the returned hook, guarded by a mutex), so one hook may serve several
// reducers at once. Host buckets only: InvalidArgument for a bucket on a CUDA device.
BucketHook compress_hook(const CompressHookOptions& options);

}  // namespace lockstep::ddp
