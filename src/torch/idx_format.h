// The IDX format (MNIST, Fashion-MNIST) without LibTorch: the header's magic number and
// dimensions, and the data after them, read from any byte source. read_idx (lockstep/torch/
// data.h) reads a file through zlib with it and wraps the bytes in a tensor; the fuzz harness
// (fuzz/idx_fuzz.cc) reads bytes from memory. Nothing here includes LibTorch.
//
// File layout: a big-endian u32 magic number 0x000008NN (unsigned bytes, NN >= 1 dimensions), NN
// big-endian u32 dimensions, then the product of the dimensions in bytes, and nothing after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::torch {

// Where the reader takes bytes from.
class IdxSource {
 public:
  virtual ~IdxSource() = default;
  // Reads up to `bytes` bytes into out; returns how many (fewer only at the end of the data).
  virtual size_t read(void* out, size_t bytes) = 0;
  // Whether the data ended before its container said it would (a cut-off gzip stream), for the
  // truncation error.
  virtual bool ended_early() const { return false; }
};

struct IdxData {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // the product of dims, in the file's order
};

// Reads a whole IDX file of unsigned bytes from source. expected_magic: the magic number the file
// must start with (0 accepts any unsigned-byte IDX file). Errors (InvalidArgument, naming `path`):
// a header that is cut off; a magic number other than the expected one (both shown) or not an
// unsigned-byte one; a data section shorter or longer than the dimensions say (both sizes shown).
IdxData read_idx_data(IdxSource& source, const std::string& path, uint32_t expected_magic);

// "2 x 3 x 4".
std::string idx_dims_text(const std::vector<int64_t>& dims);

}  // namespace lockstep::torch
