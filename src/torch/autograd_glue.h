// [Autograd glue] Every LibTorch internal DDP relies on (written against 1.13), in one place: a
// port to 2.x changes only autograd_glue.cc (there, Tensor::register_post_accumulate_grad_hook
// can replace the accumulator post hook).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

namespace lockstep::torch::detail {

// Runs `fn` when `node` is about to run in a backward pass.
void add_node_pre_hook(::torch::autograd::Node& node, std::function<void()> fn);

// The parameter's gradient accumulator (the autograd node that writes .grad()). The tensor holds
// it weakly: keep the returned pointer, or the node (and its hooks) vanish after each backward.
std::shared_ptr<::torch::autograd::Node> accumulator_of(const at::Tensor& param);

// Runs `fn` after the accumulator has updated .grad(); returns the key that removes it.
uintptr_t add_accumulator_hook(::torch::autograd::Node& accumulator, std::function<void()> fn);
void remove_accumulator_hook(::torch::autograd::Node& accumulator, uintptr_t key);

// Runs `fn` once the running backward pass has finished. REQUIRES: called from a hook inside it.
void at_end_of_backward(std::function<void()> fn);

// Every node reachable from the outputs' gradient functions (and the accumulators of outputs that
// are themselves leaves), added to `seen`.
void reachable_nodes(const std::vector<at::Tensor>& outputs,
                     std::unordered_set<const ::torch::autograd::Node*>& seen);

}  // namespace lockstep::torch::detail
