// The built-in communication hooks (comm_hooks.h), on top of the reducer's bucket hooks.
#include "lockstep/torch/comm_hooks.h"

#include "ddp/comm_hook.h"
#include "tensor_views.h"

namespace lockstep::torch {

namespace {

// A reducer bucket hook applied to a GradBucket's buffer.
CommHook from_bucket_hook(ddp::BucketHook hook) {
  return [hook = std::move(hook)](ProcessGroup& group, GradBucket& bucket) {
    ddp::BucketRef ref;
    ref.index = bucket.index;
    ref.is_last = bucket.is_last;
    ref.buffer = detail::buffer_of(bucket.buffer);
    ddp::PendingReduction pending = hook(group, ref);
    return HookWork{std::move(pending.work), std::move(pending.finish)};
  };
}

CommHook compress(DType wire, const CompressOptions& options) {
  return from_bucket_hook(
      ddp::compress_hook({.wire = wire, .divide_before_sum = options.divide_before_sum}));
}

}  // namespace

CommHook allreduce_hook() {
  return from_bucket_hook(ddp::average_hook(kGroupTimeout));
}

CommHook fp16_compress_hook(const CompressOptions& options) {
  return compress(DType::f16, options);
}

CommHook bf16_compress_hook(const CompressOptions& options) {
  return compress(DType::bf16, options);
}

}  // namespace lockstep::torch
