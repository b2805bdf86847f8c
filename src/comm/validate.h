// Argument checks shared by the ProcessGroup front end. Each throws InvalidArgument naming the op
// and the argument, before any communication happens.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "comm/op.h"
#include "lockstep/core/buffer.h"
#include "lockstep/core/reduce_op.h"

namespace lockstep::validate {

// root (or peer) is a rank of a group of `size`.
void rank_in_group(std::string_view op, std::string_view what, int rank, int size);
// The dtype is reducible by `reduce_op` (bxor on float, any op on bool, ... are rejected).
void reducible(std::string_view op, DType dtype, ReduceOp reduce_op);
// A view with count > 0 has non-null data.
void has_data(std::string_view op, std::string_view what, ConstBufferView v);
// input and output have the same dtype.
void same_dtype(std::string_view op, ConstBufferView input, ConstBufferView output);
// input and output live on the same device (both host memory, or both on one CUDA device).
void same_device(std::string_view op, ConstBufferView input, ConstBufferView output);
// v.count == expected; `why` explains where expected comes from ("size 3 x input 4").
void count_is(std::string_view op, std::string_view what, ConstBufferView v, size_t expected,
              std::string_view why);
// counts has one entry per rank; returns their sum.
size_t counts_sum(std::string_view op, std::string_view what, std::span<const size_t> counts,
                  int size);
// A forced op.algorithm is one op.kind offers: all_reduce runs ring, recursive_doubling or
// automatic; broadcast tree, chain or automatic; other kinds ignore it. Every backend accepts the
// same choices (one that has no such algorithms, like shm, mpi or nccl, ignores them), so that
// code written for one runs on all.
void algorithm(const Op& op);
// count divides evenly into `parts` slots.
void divisible(std::string_view op, std::string_view what, ConstBufferView v, int parts);

}  // namespace lockstep::validate
