#include "backends/mpi/piggyback.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "comm/reduction_plan.h"
#include "core/reduce.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// Up to 8 ranks a whole 4 KiB contribution; beyond, each rank sends size-1 blocks, so less.
constexpr size_t kCapacity = 4096;
constexpr size_t kWideCapacityTotal = 32 * 1024;  // per rank, over its size-1 blocks

size_t total(const std::vector<size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

size_t offset_of(const std::vector<size_t>& counts, int rank) {
  return std::accumulate(counts.begin(), counts.begin() + rank, size_t{0});
}

// dst = the blocks' elements [first, first + count) reduced in rank order, as the op's
// ReductionPlan says.
void reduce_blocks(const Op& op, const BlockExchange& blocks, int size, size_t first, size_t count,
                   void* dst, Scratch& scratch) {
  const size_t es = element_size(op.dtype);
  const auto at = [&](int r) { return blocks.payload(r) + first * es; };
  if (count == 0) return;
  const ReductionPlan plan = plan_reduction(op.dtype, op.reduce_op, size);
  if (plan.widen) {
    auto* sum = static_cast<float*>(scratch.get(Scratch::kWideOut, count * sizeof(float)));
    auto* next = static_cast<float*>(scratch.get(Scratch::kWideIn, count * sizeof(float)));
    widen_to_f32(sum, at(0), count, op.dtype);
    for (int r = 1; r < size; ++r) {
      widen_to_f32(next, at(r), count, op.dtype);
      reduce_into(sum, next, count, DType::f32, plan.combine);
    }
    if (plan.divisor > 0) finish_average(sum, count, DType::f32, plan.divisor);
    narrow_from_f32(dst, sum, count, op.dtype);
    return;
  }
  reduce_pair(dst, at(0), at(1), count, op.dtype, plan.combine);
  for (int r = 2; r < size; ++r) reduce_into(dst, at(r), count, op.dtype, plan.combine);
  if (plan.divisor > 0) finish_average(dst, count, op.dtype, plan.divisor);
}

void copy(void* dst, const std::byte* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

}  // namespace

size_t piggyback_capacity(int size) {
  if (size > kDirectRanks) return 0;
  if (size <= 8) return kCapacity;
  return kWideCapacityTotal / static_cast<size_t>(size - 1) / 64 * 64;
}

bool piggybacks(const Op& op, int size) {
  const size_t es = element_size(op.dtype);
  size_t largest = 0;
  switch (op.kind) {
    case OpKind::barrier:
      break;
    case OpKind::all_reduce:
    case OpKind::reduce:
    case OpKind::broadcast:
      largest = op.count * es;
      break;
    case OpKind::all_gather:
    case OpKind::gather:
      largest = op.counts.empty() ? 0 : *std::max_element(op.counts.begin(), op.counts.end()) * es;
      break;
    case OpKind::scatter:
    case OpKind::reduce_scatter:
      largest = total(op.counts) * es;
      break;
    case OpKind::all_to_all:
      if (op.variable) return false;
      largest = total(op.counts) * es;
      break;
    default:
      return false;
  }
  return size >= 2 && largest <= piggyback_capacity(size);
}

size_t write_contribution(const Op& op, int rank, std::byte* to) {
  const size_t es = element_size(op.dtype);
  size_t bytes = 0;
  const void* from = op.input;
  switch (op.kind) {
    case OpKind::all_reduce:
    case OpKind::reduce:
      bytes = op.count * es;
      break;
    case OpKind::broadcast:
      from = op.output;  // the root's data is in its output, as MPI_Bcast takes it
      bytes = rank == op.root ? op.count * es : 0;
      break;
    case OpKind::all_gather:
    case OpKind::gather:
      bytes = op.counts[static_cast<size_t>(rank)] * es;
      break;
    case OpKind::scatter:
      bytes = rank == op.root ? total(op.counts) * es : 0;
      break;
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      bytes = total(op.counts) * es;
      break;
    default:
      break;
  }
  copy(to, static_cast<const std::byte*>(from), bytes);
  return bytes;
}

void finish_from_blocks(const Op& op, const BlockExchange& blocks, int rank, int size,
                        Scratch& scratch) {
  const size_t es = element_size(op.dtype);
  auto* out = static_cast<std::byte*>(op.output);
  const size_t me = static_cast<size_t>(rank);
  switch (op.kind) {
    case OpKind::barrier:
      return;
    case OpKind::all_reduce:
      reduce_blocks(op, blocks, size, 0, op.count, out, scratch);
      return;
    case OpKind::reduce:
      if (rank == op.root) reduce_blocks(op, blocks, size, 0, op.count, out, scratch);
      return;
    case OpKind::broadcast:
      if (rank != op.root) copy(out, blocks.payload(op.root), op.count * es);
      return;
    case OpKind::all_gather:
    case OpKind::gather:
      if (op.kind == OpKind::gather && rank != op.root) return;
      for (int r = 0; r < size; ++r)
        copy(out + offset_of(op.counts, r) * es, blocks.payload(r),
             op.counts[static_cast<size_t>(r)] * es);
      return;
    case OpKind::scatter:
      copy(out, blocks.payload(op.root) + offset_of(op.counts, rank) * es, op.counts[me] * es);
      return;
    case OpKind::reduce_scatter:
      reduce_blocks(op, blocks, size, offset_of(op.counts, rank), op.counts[me], out, scratch);
      return;
    case OpKind::all_to_all: {
      // Fixed all_to_all: every rank sends counts[0] elements to each rank.
      const size_t slice = op.counts[0] * es;
      for (int r = 0; r < size; ++r)
        copy(out + static_cast<size_t>(r) * slice, blocks.payload(r) + me * slice, slice);
      return;
    }
    default:
      break;
  }
  throw InvalidArgument(detail::concat("mpi backend: ", op.name(), " cannot travel in blocks"));
}

}  // namespace lockstep::mpi
