// checkpoint() (include/lockstep/torch/activation_checkpoint.h): a custom autograd function
// whose backward recomputes the block and runs a nested backward through it.
#include "lockstep/torch/activation_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

#include <mutex>

#include "lockstep/core/error.h"

namespace lockstep::torch {

namespace {

using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

// The block, carried from forward to backward in the autograd context.
struct Block : ::torch::CustomClassHolder {
  std::function<at::Tensor(const at::Tensor&)> fn;
  bool preserve_rng_state = true;
};

at::Tensor rng_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

class Recompute : public ::torch::autograd::Function<Recompute> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const c10::intrusive_ptr<Block>& block) {
    ctx->saved_data["block"] = c10::IValue::make_capsule(block);
    if (block->preserve_rng_state) ctx->saved_data["rng"] = rng_state();
    ctx->save_for_backward({input});
    return block->fn(input);  // grad mode is off inside a custom function's forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor input = ctx->get_saved_variables().at(0);
    auto block = c10::static_intrusive_pointer_cast<Block>(ctx->saved_data["block"].toCapsule());
    at::Tensor x = input.detach();
    x.requires_grad_(input.requires_grad());
    at::Tensor out;
    {
      at::Tensor now;
      if (block->preserve_rng_state) {
        now = rng_state();
        set_rng_state(ctx->saved_data["rng"].toTensor());
      }
      struct Restore {
        at::Tensor state;
        ~Restore() {
          if (state.defined()) set_rng_state(state);
        }
      } restore{now};
      at::AutoGradMode grad_on(true);
      out = block->fn(x);
    }
    LOCKSTEP_ENFORCE(out.defined(), InvalidArgument,
                     "checkpoint: the block returned an undefined tensor when recomputed");
    if (out.requires_grad()) ::torch::autograd::backward({out}, {grads.at(0)});
    return {x.requires_grad() && x.grad().defined() ? x.grad() : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpoint(std::function<at::Tensor(const at::Tensor&)> fn, const at::Tensor& input,
                      CheckpointOptions options) {
  LOCKSTEP_ENFORCE(fn != nullptr, InvalidArgument, "checkpoint: no block function");
  LOCKSTEP_ENFORCE(input.defined(), InvalidArgument, "checkpoint: the input is undefined");
  // Gradients reach the block's parameters only through the function's node, which exists only
  // when the input requires a gradient: otherwise run the block plainly (correct, no saving).
  if (!::torch::autograd::GradMode::is_enabled() || !input.requires_grad()) return fn(input);
  auto block = c10::make_intrusive<Block>();
  block->fn = std::move(fn);
  block->preserve_rng_state = options.preserve_rng_state;
  return Recompute::apply(input, block);
}

}  // namespace lockstep::torch
