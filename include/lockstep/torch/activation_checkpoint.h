// Activation checkpointing for LibTorch: trade compute for memory by not keeping a block's
// intermediate activations; backward runs the block's forward again to get them (reentrant, as
// torch.utils.checkpoint with use_reentrant=True).
//
//   at::Tensor h = lockstep::torch::checkpoint([&](const at::Tensor& x) { return block->forward(x);
//   },
//                                              input);
//
// Forward runs `fn` without recording a graph and keeps only `input`. When the backward pass
// reaches the block, it runs `fn` again on a detached copy of `input` with grad mode on, and then
// a nested backward through that fresh graph: the block's parameters receive their gradients
// inside that nested pass, and the input's gradient flows on. `fn` must compute the same function
// both times; with preserve_rng_state, the CPU generator's state at the first call is restored
// for the second, so dropout draws the same mask.
//
// Under DistributedDataParallel, a parameter used in several checkpointed calls (a block applied
// twice) gets its gradient once per call: set DdpOptions::static_graph (see [Static graph] in
// ddp.h).
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace lockstep::torch {

struct CheckpointOptions {
  // Restore the default CPU generator's state for the recomputation (see above). The generator is
  // process-wide: turn this off when several threads draw random numbers at the same time.
  bool preserve_rng_state = true;
};

// fn(input), without keeping fn's activations (see the top of this file). When grad mode is off,
// or `input` does not require a gradient, it is plainly fn(input), activations kept: autograd
// reaches the block's parameters only through a node that exists when the input requires a
// gradient (the first block of a network, fed with data, is therefore not checkpointed).
at::Tensor checkpoint(std::function<at::Tensor(const at::Tensor&)> fn, const at::Tensor& input,
                      CheckpointOptions options = {});

}  // namespace lockstep::torch
