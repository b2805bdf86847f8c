// The part of read_checkpoint (lockstep/torch/checkpoint.h) after LibTorch has opened the file's
// archive: the format key, the model's tensors (names and shapes checked), the optimizer and the
// counters. Separate so that the fuzz harness (fuzz/checkpoint_fuzz.cc) can run it on an archive
// loaded from bytes in memory; the file format itself is LibTorch's.
#pragma once

#include <torch/serialize/input-archive.h>

#include <string>

#include "lockstep/torch/checkpoint.h"

namespace lockstep::torch {

// Reads the checkpoint in `root` into state; `path` names it in errors. Errors as
// read_checkpoint's.
void read_checkpoint_archive(::torch::serialize::InputArchive& root, const std::string& path,
                             CheckpointState* state);

}  // namespace lockstep::torch
