// One DDP step on 2 ranks (threads of this process, over a HashStore) against one step of the
// same model on both ranks' batches at once: the parameters must agree, on both ranks.
#include <lockstep/group/init.h>
#include <lockstep/store/hash_store.h>
#include <lockstep/torch/ddp.h>
#include <torch/torch.h>

#include "run_ranks.h"

#include <cstdio>
#include <vector>

namespace {

constexpr int kWorldSize = 2;
constexpr int kBatch = 8;

torch::nn::Linear make_model() {
  torch::manual_seed(0);
  return torch::nn::Linear(4, 1);
}

// Rank r's half of the batch (the whole batch is both halves, in rank order).
std::pair<torch::Tensor, torch::Tensor> batch(int rank) {
  auto x = torch::arange(kBatch * 4, torch::kFloat).reshape({kBatch, 4}) / 10.0 + rank;
  auto y = x.sum(1, true) * 0.5 - rank;
  return {x, y};
}

void step(torch::nn::Module& module, const std::function<torch::Tensor(torch::Tensor)>& forward,
          const torch::Tensor& x, const torch::Tensor& y) {
  torch::optim::SGD opt(module.parameters(), 0.1);
  opt.zero_grad();
  torch::mse_loss(forward(x), y).backward();
  opt.step();
}

}  // namespace

int main() {
  // The reference: one process, the whole batch.
  auto reference = make_model();
  auto [x0, y0] = batch(0);
  auto [x1, y1] = batch(1);
  step(
      *reference, [&](torch::Tensor x) { return reference(x); }, torch::cat({x0, x1}),
      torch::cat({y0, y1}));

  auto store = std::make_shared<lockstep::HashStore>();
  std::vector<torch::Tensor> weights(kWorldSize);
  // Made here, one after the other: manual_seed and the initialisation share LibTorch's one
  // generator, which the rank threads would race on.
  std::vector<torch::nn::Linear> models;
  for (int r = 0; r < kWorldSize; ++r) models.push_back(make_model());
  const bool ran = run_ranks("lockstep torch consumer", kWorldSize, [&](int r) {
    auto group = lockstep::init_process_group(
        {.backend = "tcp", .rank = r, .world_size = kWorldSize, .store = store});
    torch::nn::Linear model = models[static_cast<size_t>(r)];
    lockstep::torch::DistributedDataParallel ddp(model, group);
    auto [x, y] = batch(r);
    step(
        *model, [&](torch::Tensor in) { return ddp(in); }, x, y);
    weights[r] = model->weight.detach().clone();
  });
  if (!ran) return 1;
  for (int r = 0; r < kWorldSize; ++r) {
    if (!torch::allclose(weights[r], reference->weight, 1e-5, 1e-6)) {
      std::fprintf(stderr, "lockstep torch consumer: rank %d's weights differ from the reference\n",
                   r);
      return 1;
    }
  }
  std::printf("lockstep torch consumer: ok (DDP over %d ranks = one step on the whole batch)\n",
              kWorldSize);
  return 0;
}
