// Checkpoints for data-parallel training: one rank writes, atomically; every rank reads.
//
// [Atomic write] write_checkpoint serializes into a temporary file in the target's folder
// ("<name>.tmp.<pid>"), fsyncs it, renames it over the target, then fsyncs the folder. rename()
// replaces the target in one step, so a reader, or a job restarted after a crash at any point of
// the save (even SIGKILL or a power cut after the folder fsync), finds either the previous complete
// checkpoint or the new complete one, never a mix. A crashed save leaves only its temporary file;
// the next successful save of the same target removes such leftovers of dead processes.
//
// [Format] A LibTorch archive (torch::serialize::OutputArchive) with the nested archives "model"
// (parameters and buffers, torch::nn::Module::save) and "optimizer" (torch::optim::Optimizer::save)
// and the int64 counters under "counters/<name>" (e.g. epoch, step), and with a sampler, "sampler"
// (its cursor(), data.h [Resume], as 6 int64s under "sampler/cursor").
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "lockstep/comm/options.h"
#include "lockstep/group/process_group.h"
#include "lockstep/torch/data.h"

namespace lockstep::torch {

// What a checkpoint holds. The pointers are borrowed for the duration of one call.
struct CheckpointState {
  ::torch::nn::Module* model = nullptr;            // required
  ::torch::optim::Optimizer* optimizer = nullptr;  // optional
  std::map<std::string, int64_t> counters;         // e.g. {{"epoch", 3}}
  // Optional: where the epoch stands, for a save in the middle of one. Saved as its cursor(); a
  // read resumes it there (DistributedSampler::resume, at any world size).
  DistributedSampler* sampler = nullptr;
};

struct CheckpointWriteOptions {
  // A fault-injection seam for tests: called after each chunk written to the temporary file, with
  // the bytes written so far (the test crashes the process there). Empty in normal use.
  std::function<void(size_t bytes_written)> after_chunk;
};

// Writes `state` to `path` atomically (see [Atomic write]). Not collective; blocking file I/O.
// Errors: InvalidArgument when model is null; ConfigError naming the path and errno when the
// folder is missing or not writable, or the disk is full (the previous checkpoint stays intact).
void write_checkpoint(const std::string& path, const CheckpointState& state,
                      const CheckpointWriteOptions& options = {});

// Reads `path` into state: model parameters and buffers, the optimizer's state when
// state.optimizer is set, every counter stored in the file (replacing state->counters), and the
// sampler's place when state.sampler is set.
// Not collective. Errors: ConfigError when the file is missing or unreadable; InvalidArgument
// naming the file when it is not a lockstep checkpoint or does not fit the model (a parameter
// missing or of another shape), holds no sampler cursor that state asks for, or a cursor of
// another dataset, seed or shuffle.
void read_checkpoint(const std::string& path, CheckpointState* state);

struct CheckpointOptions {
  int root = 0;  // the rank that writes
  // Deadline of the collective steps (the barrier after the write, the agreement on load).
  std::chrono::milliseconds timeout = kGroupTimeout;
};

// Collective over group: rank options.root writes `path` atomically, then every rank waits until
// the file is in place (a barrier), so a load right after sees it. Only the root's state is read;
// under DDP all ranks hold the same parameters. If the root fails to write, it throws, and the
// other ranks fail at the barrier (NetworkError) or time out.
void save_checkpoint(ProcessGroup& group, const std::string& path, const CheckpointState& state,
                     const CheckpointOptions& options = {});

// Collective over group: every rank reads `path` itself (the folder must be visible to every rank,
// e.g. one host or a shared filesystem). Returns false on every rank when no rank finds the file
// (a fresh start). Throws MismatchError on every rank when only some ranks find it, or when they
// read different counters (the ranks see different files), naming each rank's view.
bool load_checkpoint(ProcessGroup& group, const std::string& path, CheckpointState* state,
                     const CheckpointOptions& options = {});

}  // namespace lockstep::torch
