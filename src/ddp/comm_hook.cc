#include "ddp/comm_hook.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/convert16.h"
#include "lockstep/core/error.h"

namespace lockstep::ddp {

namespace {

// Scratch memory of a compress hook: per bucket, the 16-bit wire copy (and an f32 staging copy
// for f64 buckets). Keyed by the bucket's memory, which is unique among buckets in flight even
// when one hook object serves several reducers (ranks as threads sharing one DdpOptions).
struct CompressScratch {
  static constexpr size_t kMaxIdle = 64;
  struct Entry {
    std::vector<uint16_t> wire;
    std::vector<float> staging;
    bool busy = false;
  };
  std::mutex mu;
  std::map<const void*, Entry> entries;  // std::map: entries never move

  Entry& acquire(const void* bucket) {
    std::lock_guard<std::mutex> lock(mu);
    if (entries.size() > kMaxIdle)
      std::erase_if(entries, [](const auto& e) { return !e.second.busy; });
    Entry& e = entries[bucket];
    e.busy = true;
    return e;
  }
  void release(Entry& e) {
    std::lock_guard<std::mutex> lock(mu);
    e.busy = false;
  }
};

void narrow(DType wire, uint16_t* dst, const float* src, size_t count) {
  if (wire == DType::f16) {
    detail::narrow_f16(dst, src, count);
  } else {
    detail::narrow_bf16(dst, src, count);
  }
}

void widen(DType wire, float* dst, const uint16_t* src, size_t count) {
  if (wire == DType::f16) {
    detail::widen_f16(dst, src, count);
  } else {
    detail::widen_bf16(dst, src, count);
  }
}

// The bucket as floats, scaled by `scale`: the bucket itself (f32) or the staging copy (f64).
float* as_scaled_floats(const BufferView& b, float scale, std::vector<float>& staging) {
  if (b.dtype == DType::f32) {
    auto* f = static_cast<float*>(b.data);
    if (scale != 1.0f) {
      for (size_t i = 0; i < b.count; ++i) f[i] *= scale;
    }
    return f;
  }
  const auto* d = static_cast<const double*>(b.data);
  staging.resize(b.count);
  for (size_t i = 0; i < b.count; ++i) staging[i] = static_cast<float>(d[i] * scale);
  return staging.data();
}

// Widens the reduced wire copy back into the bucket.
void unpack(const BufferView& b, DType wire, const std::vector<uint16_t>& packed,
            std::vector<float>& staging) {
  if (b.dtype == DType::f32) {
    widen(wire, static_cast<float*>(b.data), packed.data(), b.count);
    return;
  }
  staging.resize(b.count);
  widen(wire, staging.data(), packed.data(), b.count);
  auto* d = static_cast<double*>(b.data);
  for (size_t i = 0; i < b.count; ++i) d[i] = staging[i];
}

}  // namespace

BucketHook average_hook(std::chrono::milliseconds timeout) {
  return [timeout](ProcessGroup& group, const BucketRef& bucket) {
    return PendingReduction{
        group.all_reduce(bucket.buffer, {.op = ReduceOp::avg, .timeout = timeout}), {}};
  };
}

BucketHook compress_hook(const CompressHookOptions& options) {
  LOCKSTEP_ENFORCE(options.wire == DType::f16 || options.wire == DType::bf16, InvalidArgument,
                   "DDP compress hook: the wire dtype must be f16 or bf16, not ",
                   dtype_name(options.wire));
  auto scratch = std::make_shared<CompressScratch>();
  return [options, scratch](ProcessGroup& group, const BucketRef& bucket) -> PendingReduction {
    const BufferView& b = bucket.buffer;
    if (b.dtype != DType::f32 && b.dtype != DType::f64) {
      return average_hook(options.timeout)(group, bucket);
    }
    LOCKSTEP_ENFORCE(!b.device.is_cuda(), InvalidArgument, "DDP compress hook: bucket ",
                     bucket.index, " is on ", device_name(b.device),
                     "; this hook narrows on the CPU (LibTorch's fp16_compress_hook and "
                     "bf16_compress_hook narrow on the device)");
    CompressScratch::Entry& entry = scratch->acquire(b.data);
    std::vector<uint16_t>* packed = &entry.wire;
    std::vector<float>* staging = &entry.staging;
    float scale = options.divide_before_sum ? 1.0f / static_cast<float>(group.size()) : 1.0f;
    packed->resize(b.count);
    narrow(options.wire, packed->data(), as_scaled_floats(b, scale, *staging), b.count);
    BufferView wire_view{packed->data(), b.count, options.wire};
    ReduceOp op = options.divide_before_sum ? ReduceOp::sum : ReduceOp::avg;
    WorkPtr work = group.all_reduce(wire_view, {.op = op, .timeout = options.timeout});
    DType wire = options.wire;
    return PendingReduction{work, [b, wire, &entry, scratch] {
                              unpack(b, wire, entry.wire, entry.staging);
                              scratch->release(entry);
                            }};
  };
}

}  // namespace lockstep::ddp
