// Communication hooks for DistributedDataParallel: how one bucket of gradients is averaged over
// the group.
//
// [Buckets] DDP packs the gradients of several parameters into one flat, contiguous bucket and
// hands each bucket to the hook once all its gradients are ready, in bucket order, on the thread
// that runs backward. The hook starts the communication (asynchronously, through the group) and
// returns at once, so backward goes on while the bucket travels. At the end of backward DDP waits
// for every bucket's Work, runs the hook's finish step, and writes the bucket back into the
// parameters' gradients.
//
// Contract of a hook:
//   - once `work` has completed and `finish` has run, bucket.buffer holds the average over the
//     group of every rank's bucket.buffer (or an approximation of it, for compression);
//   - it issues the same collectives, in the same order, on every rank (the bucket layout is the
//     same on every rank, so a hook that depends only on the bucket and the group is safe);
//   - it keeps alive whatever memory its Work still uses (capture it in `finish`);
//   - it does not touch bucket.buffer between returning and `finish`, except through the Work.
// A hook that throws fails the backward pass with its exception.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/comm/work.h"
#include "lockstep/group/process_group.h"

namespace lockstep::torch {

// One bucket of gradients, as a hook sees it.
struct GradBucket {
  size_t index = 0;      // position in launch order: 0 is launched first
  bool is_last = false;  // the last bucket of this backward pass
  // Flat, contiguous, 1-D; the dtype of the bucket's parameters. A view of DDP's own memory: the
  // hook reduces it in place. Valid until the hook's finish step has returned.
  at::Tensor buffer;
  // The bucket's parameters in buffer order, by module path ("fc1.weight"), with their offsets
  // and element counts in buffer.
  std::vector<std::string> parameter_names;
  std::vector<size_t> offsets;
  std::vector<size_t> counts;
};

// What a hook returns: the communication in flight, and what to do once it has completed.
struct HookWork {
  WorkPtr work;                  // null when the hook finished synchronously
  std::function<void()> finish;  // may be empty; runs on the backward thread after work->wait()
};

// A communication hook. `group` is the DDP's process group. Called on the backward thread, in
// bucket order, once per bucket per synchronised backward pass.
using CommHook = std::function<HookWork(ProcessGroup& group, GradBucket& bucket)>;

struct CompressOptions {
  // Divide by the group size before the 16-bit sum (as PyTorch's hooks do) so that large
  // gradients do not overflow f16. Turning it off averages in one step instead (ReduceOp::avg).
  bool divide_before_sum = true;
};

// The default: all_reduce(buffer, avg) in place. Exact (up to the order of the sum).
CommHook allreduce_hook();

// Compresses the bucket to IEEE half before communicating and decompresses after: half the
// bytes on the wire, about 3 significant decimal digits. f16 and bf16 buckets are averaged as
// they are. A CUDA bucket is narrowed and widened on its device. The hook keeps scratch memory
// per bucket; one hook object may serve several DDP instances at once (ranks as threads sharing
// one DdpOptions).
CommHook fp16_compress_hook(const CompressOptions& options = {});

// Like fp16_compress_hook with bfloat16: the range of f32, about 2 significant decimal digits.
CommHook bf16_compress_hook(const CompressOptions& options = {});

}  // namespace lockstep::torch
