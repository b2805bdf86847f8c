// The checkpoint reader (src/torch/checkpoint.cc) on bytes in memory: LibTorch opens the archive
// (InputArchive::load_from, as read_checkpoint does for a file), then read_checkpoint_archive
// reads the format key, the model's tensors, the optimizer's state and the counters. Built only
// when LibTorch is found: the file format is LibTorch's (a zip of pickles), so its parsing cannot
// be separated from LibTorch.
//
// Input: the checkpoint file's bytes. Checked: a bad file is a lockstep error (read_checkpoint
// turns LibTorch's own errors on opening into InvalidArgument), never anything else.
#include <torch/torch.h>

#include "lockstep/core/error.h"
#include "torch/checkpoint_archive.h"

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
  ::torch::serialize::InputArchive root;
  try {
    root.load_from(reinterpret_cast<const char*>(data), size);
  } catch (const c10::Error&) {
    return 0;  // read_checkpoint: InvalidArgument "cannot be read as a LibTorch archive"
  }
  lockstep::torch::CheckpointState state{.model = net,
                                         .optimizer = (size & 1) != 0 ? optimizer : nullptr};
  try {
    lockstep::torch::read_checkpoint_archive(root, "fuzz.ckpt", &state);
  } catch (const lockstep::Error&) {
  }
  return 0;
}
