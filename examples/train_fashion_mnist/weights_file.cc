#include "weights_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace train_fashion_mnist {

void write_weights(const torch::nn::Module& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  auto put = [&](const char* kind, const std::string& name, const torch::Tensor& t) {
    const torch::Tensor bytes = t.detach().contiguous().cpu();
    std::ostringstream head;
    head << kind << " " << name << " " << bytes.scalar_type() << " " << bytes.sizes() << "\n";
    out << head.str();
    out.write(static_cast<const char*>(bytes.data_ptr()),
              static_cast<std::streamsize>(bytes.numel() * bytes.element_size()));
  };
  for (const auto& p : model.named_parameters()) put("parameter", p.key(), p.value());
  for (const auto& b : model.named_buffers()) put("buffer", b.key(), b.value());
  out.close();
  if (!out) throw std::runtime_error("--save-weights: cannot write " + path);
}

}  // namespace train_fashion_mnist
