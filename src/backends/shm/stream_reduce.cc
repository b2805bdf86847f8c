#include "backends/shm/stream_reduce.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace lockstep::shm {

namespace {

constexpr int kMaxDsts = 64;

bool has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

// Scalar elements [begin, end): the unaligned head and the tail.
template <class T>
void sum_scalar(void* const* dsts, int ndst, const void* const* srcs, int n, size_t begin,
                size_t end) {
  for (size_t i = begin; i < end; ++i) {
    T acc = static_cast<const T*>(srcs[0])[i];
    for (int q = 1; q < n; ++q) acc = acc + static_cast<const T*>(srcs[q])[i];
    for (int d = 0; d < ndst; ++d) static_cast<T*>(dsts[d])[i] = acc;
  }
}

__attribute__((target("avx2"))) void sum_f32(void* const* dsts, int ndst, const void* const* srcs,
                                             int n, size_t begin, size_t end) {
  for (size_t i = begin; i < end; i += 8) {
    __m256 acc = _mm256_loadu_ps(static_cast<const float*>(srcs[0]) + i);
    for (int q = 1; q < n; ++q)
      acc = _mm256_add_ps(acc, _mm256_loadu_ps(static_cast<const float*>(srcs[q]) + i));
    for (int d = 0; d < ndst; ++d) _mm256_stream_ps(static_cast<float*>(dsts[d]) + i, acc);
  }
}

__attribute__((target("avx2"))) void sum_f64(void* const* dsts, int ndst, const void* const* srcs,
                                             int n, size_t begin, size_t end) {
  for (size_t i = begin; i < end; i += 4) {
    __m256d acc = _mm256_loadu_pd(static_cast<const double*>(srcs[0]) + i);
    for (int q = 1; q < n; ++q)
      acc = _mm256_add_pd(acc, _mm256_loadu_pd(static_cast<const double*>(srcs[q]) + i));
    for (int d = 0; d < ndst; ++d) _mm256_stream_pd(static_cast<double*>(dsts[d]) + i, acc);
  }
}

// The pipelined all_reduce's pass (stream_reduce_keep): dsts[0] gets ordinary stores, dsts[1]
// non-temporal ones.
__attribute__((target("avx2"))) void sum_keep_f32(void* const* dsts, int, const void* const* srcs,
                                                  int n, size_t begin, size_t end) {
  auto* keep = static_cast<float*>(dsts[0]);
  auto* out = static_cast<float*>(dsts[1]);
  for (size_t i = begin; i < end; i += 8) {
    __m256 acc = _mm256_loadu_ps(static_cast<const float*>(srcs[0]) + i);
    for (int q = 1; q < n; ++q)
      acc = _mm256_add_ps(acc, _mm256_loadu_ps(static_cast<const float*>(srcs[q]) + i));
    _mm256_storeu_ps(keep + i, acc);
    _mm256_stream_ps(out + i, acc);
  }
}

__attribute__((target("avx2"))) void sum_keep_f64(void* const* dsts, int, const void* const* srcs,
                                                  int n, size_t begin, size_t end) {
  auto* keep = static_cast<double*>(dsts[0]);
  auto* out = static_cast<double*>(dsts[1]);
  for (size_t i = begin; i < end; i += 4) {
    __m256d acc = _mm256_loadu_pd(static_cast<const double*>(srcs[0]) + i);
    for (int q = 1; q < n; ++q)
      acc = _mm256_add_pd(acc, _mm256_loadu_pd(static_cast<const double*>(srcs[q]) + i));
    _mm256_storeu_pd(keep + i, acc);
    _mm256_stream_pd(out + i, acc);
  }
}

// Runs body over the elements where `aligned` is on 32 bytes, the scalar sum over the edges.
template <class T, class Body>
void run_aligned_to(const void* aligned, void* const* dsts, int ndst, const void* const* srcs,
                    int n, size_t count, Body body) {
  constexpr size_t lanes = 32 / sizeof(T);
  const size_t misalign = reinterpret_cast<uintptr_t>(aligned) % 32;
  const size_t head = std::min(count, (32 - misalign) % 32 / sizeof(T));
  const size_t body_end = head + (count - head) / lanes * lanes;
  sum_scalar<T>(dsts, ndst, srcs, n, 0, head);
  body(dsts, ndst, srcs, n, head, body_end);
  _mm_sfence();
  sum_scalar<T>(dsts, ndst, srcs, n, body_end, count);
}

template <class T, class Body>
void run(void* const* dsts, int ndst, const void* const* srcs, int n, size_t count, Body body) {
  run_aligned_to<T>(dsts[0], dsts, ndst, srcs, n, count, body);
}

}  // namespace

bool stream_reduce(void* const* dsts, int ndst, const void* const* srcs, int n, size_t count,
                   DType dtype, ReduceOp op) {
  if (op != ReduceOp::sum || (dtype != DType::f32 && dtype != DType::f64) || !has_avx2() ||
      ndst < 1 || ndst > kMaxDsts || n < 1)
    return false;
  const size_t es = element_size(dtype);
  const uintptr_t misalign = reinterpret_cast<uintptr_t>(dsts[0]) % 32;
  for (int d = 0; d < ndst; ++d)
    if (reinterpret_cast<uintptr_t>(dsts[d]) % 32 != misalign || misalign % es != 0) return false;
  if (dtype == DType::f32)
    run<float>(dsts, ndst, srcs, n, count, sum_f32);
  else
    run<double>(dsts, ndst, srcs, n, count, sum_f64);
  return true;
}

bool stream_reduce_keep(void* keep, void* dst, const void* const* srcs, int n, size_t count,
                        DType dtype, ReduceOp op) {
  if (op != ReduceOp::sum || (dtype != DType::f32 && dtype != DType::f64) || !has_avx2() || n < 1 ||
      reinterpret_cast<uintptr_t>(dst) % element_size(dtype) != 0)
    return false;
  void* const dsts[2] = {keep, dst};
  if (dtype == DType::f32)
    run_aligned_to<float>(dst, dsts, 2, srcs, n, count, sum_keep_f32);
  else
    run_aligned_to<double>(dst, dsts, 2, srcs, n, count, sum_keep_f64);
  return true;
}

}  // namespace lockstep::shm
