// Helpers shared by the LibTorch tests: a non-owning group pointer, and a module's parameters
// copied out and back in.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "lockstep/group/process_group.h"

namespace lockstep::torch::testing {

// The group of a spawn_groups thread as the shared_ptr the torch API takes (not owning).
inline std::shared_ptr<ProcessGroup> share(ProcessGroup& pg) {
  return std::shared_ptr<ProcessGroup>(std::shared_ptr<void>(), &pg);
}

// Copies of the module's parameters, in registration order.
inline std::vector<at::Tensor> parameters_of(::torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

// Writes `values` (as parameters_of returns them) into the module's parameters.
inline void load_parameters(::torch::nn::Module& m, const std::vector<at::Tensor>& values) {
  ::torch::NoGradGuard no_grad;
  auto params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(values[i]);
}

}  // namespace lockstep::torch::testing
