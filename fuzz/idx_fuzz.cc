// The IDX reader of the Fashion-MNIST loader (src/torch/idx_format.h, without LibTorch):
// read_idx_data, which read_idx runs on a file through zlib, here on bytes in memory.
//
// Input: a byte for the expected magic number (any, images or labels), then the file's bytes.
// Checked: a bad file is an InvalidArgument, and a file that reads has exactly the bytes its
// dimensions announce.
#include <algorithm>
#include <cstring>

#include "fuzz_input.h"
#include "lockstep/core/error.h"
#include "torch/idx_format.h"

using namespace lockstep;

namespace {

class MemorySource : public torch::IdxSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  size_t read(void* out, size_t bytes) override {
    const size_t n = std::min(bytes, bytes_.size() - at_);
    if (n == 0) return 0;  // out may be null then (an empty vector's data())
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr uint32_t kMagics[] = {0, 0x00000803, 0x00000801, 0};
  const uint32_t magic = kMagics[data[0] & 3];
  MemorySource source(fuzz::as_text(data + 1, size - 1));
  try {
    const torch::IdxData idx = torch::read_idx_data(source, "fuzz.idx", magic);
    size_t announced = 1;
    for (int64_t d : idx.dims) announced *= static_cast<size_t>(d);
    if (idx.bytes.size() != announced) fuzz::broken("the data is not what the dimensions announce");
  } catch (const InvalidArgument&) {
  }
  return 0;
}
