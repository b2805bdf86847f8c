// --save-weights: a model's parameters and buffers as one file to compare runs bit for bit.
#pragma once

#include <torch/nn/module.h>

#include <string>

namespace train_fashion_mnist {

// Writes every parameter and buffer of `model`, in the order Module::named_parameters and
// named_buffers give them: a line "<kind> <name> <dtype> <shape>" and then the tensor's bytes.
// Two runs whose weights are equal bit for bit write the same file. Throws std::runtime_error
// naming the path when it cannot be written.
void write_weights(const torch::nn::Module& model, const std::string& path);

}  // namespace train_fashion_mnist
