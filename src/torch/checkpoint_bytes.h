// Checkpoints as bytes in memory (lockstep/torch/checkpoint.h): read_checkpoint on the bytes of a
// checkpoint file, the same opening of LibTorch's archive and the same reading of it, for the fuzz
// harness (fuzz/checkpoint_fuzz.cc); and the two halves of write_checkpoint, the bytes and their
// atomic write, for the sharded checkpoints (sharded_checkpoint.cc), which checksum each file.
// The file format itself is LibTorch's.
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/torch/checkpoint.h"

namespace lockstep::torch {

// Reads the checkpoint in data[0, size) into state; `origin` names it in errors. Errors as
// read_checkpoint's for a file that exists.
void read_checkpoint_bytes(const char* data, size_t size, const std::string& origin,
                           CheckpointState* state);

// The bytes write_checkpoint writes for `state` ([Format]). InvalidArgument when model is null.
std::string checkpoint_bytes(const CheckpointState& state);

// Writes `bytes` to `path` as write_checkpoint does ([Atomic write]): a temporary file
// "<path>.tmp.<pid>", fsync, rename over `path`, folder fsync, then removes the temporaries of
// `path` that dead processes left. Errors: ConfigError naming the file and errno; whatever
// options.after_chunk throws (the temporary file is removed first).
void write_file_atomically(const std::string& path, const std::string& bytes,
                           const CheckpointWriteOptions& options = {});

}  // namespace lockstep::torch
