// read_checkpoint (lockstep/torch/checkpoint.h) on the bytes of a checkpoint file in memory: the
// same opening of LibTorch's archive and the same reading of it, for the fuzz harness
// (fuzz/checkpoint_fuzz.cc). The file format itself is LibTorch's.
#pragma once

#include <cstddef>
#include <string>

#include "lockstep/torch/checkpoint.h"

namespace lockstep::torch {

// Reads the checkpoint in data[0, size) into state; `origin` names it in errors. Errors as
// read_checkpoint's for a file that exists.
void read_checkpoint_bytes(const char* data, size_t size, const std::string& origin,
                           CheckpointState* state);

}  // namespace lockstep::torch
