// Helpers for the reducer tests: gradients held in plain vectors, behind GradientAccess.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"
#include "ddp/reducer.h"

namespace lockstep::ddp::testing {

// Float parameters named "p0", "p1", ... with the given element counts.
inline std::vector<ParamSpec> float_params(const std::vector<size_t>& counts) {
  std::vector<ParamSpec> params;
  for (size_t i = 0; i < counts.size(); ++i) {
    params.push_back({.name = "p" + std::to_string(i), .count = counts[i], .dtype = DType::f32});
  }
  return params;
}

// One rank's gradients: grads[p] is parameter p's gradient (empty: none yet). Records which
// parameters were written back and how often.
class VectorGrads : public GradientAccess {
 public:
  explicit VectorGrads(const std::vector<ParamSpec>& params)
      : grads(params.size()), counts_(params.size()), writes(params.size(), 0) {
    for (size_t p = 0; p < params.size(); ++p) counts_[p] = params[p].count;
  }
  void read_gradient(size_t p, BufferView slot) override {
    if (grads[p].empty()) {
      std::memset(slot.data, 0, slot.bytes());
    } else {
      std::memcpy(slot.data, grads[p].data(), slot.bytes());
    }
  }
  void write_gradient(size_t p, BufferView slot) override {
    grads[p].resize(counts_[p]);
    std::memcpy(grads[p].data(), slot.data, slot.bytes());
    writes[p] += 1;
  }
  void layout_changed() override { layout_changes += 1; }

  std::vector<std::vector<float>> grads;
  std::vector<size_t> counts_;
  std::vector<int> writes;
  int layout_changes = 0;
};

}  // namespace lockstep::ddp::testing
