// [Autograd glue] (autograd_glue.h): the LibTorch internals DDP uses.
#include "autograd_glue.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace lockstep::torch::detail {

namespace {

using ::torch::autograd::Node;

// Runs `fn` after a parameter's gradient accumulator has updated .grad().
class AccumulatorHook : public ::torch::autograd::FunctionPostHook {
 public:
  explicit AccumulatorHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  ::torch::autograd::variable_list operator()(
      const ::torch::autograd::variable_list& outputs,
      const ::torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

// Runs `fn` when a node is about to run in a backward pass.
class NodePreHook : public ::torch::autograd::FunctionPreHook {
 public:
  explicit NodePreHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  ::torch::autograd::variable_list operator()(
      const ::torch::autograd::variable_list& grads) override {
    fn_();
    return grads;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

void add_node_pre_hook(Node& node, std::function<void()> fn) {
  node.add_pre_hook(std::make_unique<NodePreHook>(std::move(fn)));
}

NodePtr accumulator_of(const at::Tensor& param) {
  return ::torch::autograd::impl::grad_accumulator(param);
}

uintptr_t add_accumulator_hook(Node& accumulator, std::function<void()> fn) {
  return accumulator.add_post_hook(std::make_unique<AccumulatorHook>(std::move(fn)));
}

void remove_accumulator_hook(Node& accumulator, uintptr_t key) {
  accumulator.del_post_hook(key);
}

void at_end_of_backward(std::function<void()> fn) {
  ::torch::autograd::Engine::get_default_engine().queue_callback(std::move(fn));
}

void reachable_nodes(const std::vector<at::Tensor>& outputs,
                     std::unordered_set<const Node*>& seen) {
  std::vector<NodePtr> stack;
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (auto fn = out.grad_fn()) {
      stack.push_back(std::move(fn));
    } else if (auto acc = ::torch::autograd::impl::try_get_grad_accumulator(out)) {
      stack.push_back(std::move(acc));
    }
  }
  while (!stack.empty()) {
    NodePtr node = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(node.get()).second) continue;
    for (const auto& edge : node->next_edges()) {
      if (edge.function && !seen.count(edge.function.get())) stack.push_back(edge.function);
    }
  }
}

}  // namespace lockstep::torch::detail
