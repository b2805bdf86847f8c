// The checkpoint reader (src/torch/checkpoint.cc) on bytes in memory (read_checkpoint_bytes):
// LibTorch opens the archive, then lockstep reads the format key, the model's tensors (names and
// shapes checked), the optimizer's state and the counters. Built only when LibTorch is found, and
// when the compiler can build LibTorch's headers: the file format is LibTorch's (a zip of
// TorchScript and pickles), so its parsing cannot be separated from LibTorch.
//
// Input: the checkpoint file's bytes; an odd size also loads an optimizer. Checked: a bad file is
// a lockstep error (InvalidArgument naming it), never anything else.
#include <torch/torch.h>

#include "lockstep/core/error.h"
#include "torch/checkpoint_bytes.h"

namespace {

// The model of the seed checkpoints (fuzz/corpus/checkpoint): a Linear(4, 2) and a buffer.
struct Net : ::torch::nn::Module {
  Net() {
    fc = register_module("fc", ::torch::nn::Linear(4, 2));
    steps = register_buffer("steps", ::torch::zeros({1}));
  }
  ::torch::nn::Linear fc{nullptr};
  ::torch::Tensor steps;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Net* net = new Net;  // one model for every input, as a training job has
  static auto* optimizer = new ::torch::optim::SGD(net->parameters(), 0.1);
  lockstep::torch::CheckpointState state{.model = net,
                                         .optimizer = (size & 1) != 0 ? optimizer : nullptr};
  try {
    lockstep::torch::read_checkpoint_bytes(reinterpret_cast<const char*>(data), size, "fuzz.ckpt",
                                           &state);
  } catch (const lockstep::Error&) {
  }
  return 0;
}
