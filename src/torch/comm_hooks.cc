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

// A CUDA bucket, narrowed and widened by torch on the current stream (the nccl backend orders
// the all_reduce after it; the widening runs after the Work, which has then finished).
HookWork compress_on_device(ProcessGroup& group, GradBucket& bucket, DType wire,
                            const CompressOptions& options) {
  at::Tensor scaled =
      options.divide_before_sum ? bucket.buffer / static_cast<double>(group.size()) : bucket.buffer;
  at::Tensor packed = scaled.to(detail::to_scalar_type(wire)).contiguous();
  ReduceOp op = options.divide_before_sum ? ReduceOp::sum : ReduceOp::avg;
  WorkPtr work = group.all_reduce(detail::buffer_of(packed), {.op = op});
  return HookWork{std::move(work),
                  [target = bucket.buffer, packed]() mutable { target.copy_(packed); }};
}

CommHook compress(DType wire, const CompressOptions& options) {
  CommHook on_host = from_bucket_hook(
      ddp::compress_hook({.wire = wire, .divide_before_sum = options.divide_before_sum}));
  return [on_host, wire, options](ProcessGroup& group, GradBucket& bucket) {
    const at::ScalarType t = bucket.buffer.scalar_type();
    if (!bucket.buffer.is_cuda() || (t != at::kFloat && t != at::kDouble))
      return on_host(group, bucket);
    return compress_on_device(group, bucket, wire, options);
  };
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
