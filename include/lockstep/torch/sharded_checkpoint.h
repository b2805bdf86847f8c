// Sharded checkpoints: every rank writes its own part in parallel, and a job resumes from them at
// any world size, the ZeRO optimizer state and the sampler's place in the epoch resharded.
//
//   lt::ShardedCheckpointState state{.model = net.ptr().get(), .optimizer = &zero,
//                                    .sampler = &sampler, .counters = {{"epoch", e}}};
//   if (lt::load_sharded_checkpoint(*group, "ckpt", &state)) ...  // collective, any world size
//   ...
//   lt::save_sharded_checkpoint(*group, "ckpt", state);             // collective
//
// [Layout] The folder (it must exist, and every rank must see it: one host or a shared
// filesystem) holds:
//   index          the commit point: a LibTorch archive that names the generation in force
//   gen-<G>/model  rank 0's model (parameters and buffers) and the counters, in the format of
//                  write_checkpoint (checkpoint.h)
//   gen-<G>/shard-<r>  rank r's part: its ZeroRedundancyOptimizer's state (Optimizer::save of its
//                  local optimizer), the global indices of the parameters it owned, its sampler
//                  cursor, the generation and the rank
// The index holds the format version, the generation G, the world size W, the name, size and
// CRC-32 of every file of generation G, the counters, the sampler cursor, the name, shape and
// dtype of every model tensor, the shape and dtype of every optimizer parameter, and the
// partition of the parameters over the W ranks.
//
// [Atomicity] A save writes generation G = 1 + the highest generation in the folder:
//   1. Every file is written as write_checkpoint writes one (temporary file, fsync, rename, folder
//      fsync), into the new folder gen-<G>: nothing of the generation in force is touched.
//   2. Once every rank reports its files durable (an all_gather), rank 0 checks that it sees each
//      of them with the reported size and writes the index, atomically: its rename is the commit.
//      A kill of any rank at any moment before the rename leaves the previous index, which names
//      the previous generation, whose files are whole; after it, the new one, whose files are too.
//   3. Only then does rank 0 remove every other gen-* folder: older generations and what dead or
//      failed saves left. A kill before that leaves extra folders, which the next save removes.
// A rank that fails to write makes every rank fail the save (naming it); nothing is committed.
// A load reads the index first, then only the files it names, checking their sizes and CRC-32s.
//
// [Resharding] The optimizer's parameters are numbered 0..P-1 in the order given to
// ZeroRedundancyOptimizer (the same on every rank). At W ranks, old rank s owned the set S_s (the
// index records it); loading at M ranks, rank m owns T_m (ZeroRedundancyOptimizer's partition
// for M). For every s whose S_s meets T_m, rank m reads shard-<s>, builds a temporary optimizer
// with the optimizer's own factory over stand-in tensors of S_s's shapes, loads the shard's
// archive into it (Optimizer::load), and moves the per-parameter state (Optimizer::state(), keyed
// by tensor) of each parameter of S_s ∩ T_m into its own optimizer, under its own tensor; a
// parameter without saved state (never stepped) gets none. Each of its parameter groups takes the
// options of the temporary group that held the group's first parameter. So rank m ends with
// exactly the state its parameters had at the save: what the owner in an uninterrupted run
// holds. This needs state kept per parameter (SGD, Adam, AdamW, Adagrad, RMSprop; not LBFGS).
//
// The sampler resumes with DistributedSampler::resume (data.h, [Resume]): the rest of the saved
// epoch dealt over the M ranks, then the next epochs as usual.
#pragma once

#include <torch/nn/module.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "lockstep/comm/options.h"
#include "lockstep/group/process_group.h"
#include "lockstep/torch/data.h"
#include "lockstep/torch/zero.h"

namespace lockstep::torch {

// What a sharded checkpoint holds. The pointers are borrowed for the duration of one call.
struct ShardedCheckpointState {
  ::torch::nn::Module* model = nullptr;          // required; replicated, rank 0's is saved
  ZeroRedundancyOptimizer* optimizer = nullptr;  // optional; every rank saves its shard's state
  DistributedSampler* sampler = nullptr;         // optional; where the epoch stands ([Resume])
  std::map<std::string, int64_t> counters{};     // e.g. {{"epoch", 3}}; rank 0's are saved
};

struct ShardedCheckpointOptions {
  // Deadline of each collective step.
  std::chrono::milliseconds timeout = kGroupTimeout;
  // A fault-injection seam for tests: called on the writing rank after each chunk written to a
  // temporary file, with the file's name in the folder ("gen-3/shard-1", "gen-3/model", "index")
  // and the bytes written so far. Empty in normal use.
  std::function<void(const std::string& file, size_t bytes_written)> after_chunk;
};

// Collective over group: writes generation G+1 of the checkpoint in `dir` ([Layout],
// [Atomicity]): each rank its shard, rank 0 the model and, once every file is durable, the index.
// With a sampler, the ranks must stand at the same place in the epoch.
// Errors, on every rank: InvalidArgument when model is null, or some ranks pass an optimizer or a
// sampler and others not; MismatchError when the samplers' cursors differ (naming each rank's);
// ConfigError naming the file and the rank when a file cannot be written (the folder missing,
// the disk full) or rank 0 does not see a rank's file (a folder not shared). The previous
// checkpoint then stays in force.
void save_sharded_checkpoint(ProcessGroup& group, const std::string& dir,
                             const ShardedCheckpointState& state,
                             const ShardedCheckpointOptions& options = {});

// Collective over group, at any world size: returns false on every rank when `dir` holds no
// checkpoint (no index). Otherwise loads the model and the counters (replacing state->counters),
// reshards the optimizer state ([Resharding]) when state->optimizer is set, resumes the sampler
// when state->sampler is set, and returns true.
// Errors, on every rank (the fit is checked on every rank before anything is loaded; a file that
// turns out damaged midway can leave part of the state loaded): MismatchError when the ranks see
// different checkpoints (naming each rank's view); ConfigError naming the path when a file the
// index names is missing, unreadable, or not the size and CRC-32 the index records;
// InvalidArgument when the checkpoint does not fit (naming the model tensor or the optimizer
// parameter and both shapes), holds no optimizer state or sampler cursor that state asks for, or
// a file is not what it should be.
bool load_sharded_checkpoint(ProcessGroup& group, const std::string& dir,
                             ShardedCheckpointState* state,
                             const ShardedCheckpointOptions& options = {});

}  // namespace lockstep::torch
