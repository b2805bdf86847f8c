// [Autograd glue] Every LibTorch internal DDP relies on, in one place, for torch 2.4 and newer.
// An autograd node is held by std::shared_ptr up to torch 2.14 and by c10::intrusive_ptr from
// 2.15: NodePtr is whichever this torch's grad_accumulator returns.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

namespace lockstep::torch::detail {

using NodePtr =
    decltype(::torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

// Runs `fn` when `node` is about to run in a backward pass.
void add_node_pre_hook(::torch::autograd::Node& node, std::function<void()> fn);

// The parameter's gradient accumulator (the autograd node that writes .grad()). The tensor holds
// it weakly: keep the returned pointer, or the node (and its hooks) vanish after each backward.
NodePtr accumulator_of(const at::Tensor& param);

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
