#include "torch/idx_format.h"

#include <algorithm>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::torch {
namespace {

using detail::concat;

constexpr size_t kChunkBytes = 64 << 10;

std::string hex32(uint32_t value) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << value;
  return out.str();
}

uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads and checks the magic number; returns the number of dimensions.
int read_idx_magic(IdxSource& source, const std::string& path, uint32_t expected_magic) {
  unsigned char header[4];
  const size_t got = source.read(header, 4);
  if (got < 4) {
    throw InvalidArgument(concat("IDX file ", path, " is truncated: ", got,
                                 " bytes, fewer than the 4-byte magic number"));
  }
  const uint32_t magic = big_endian32(header);
  if (expected_magic != 0 && magic != expected_magic) {
    throw InvalidArgument(concat("IDX file ", path, " starts with magic number ", hex32(magic),
                                 ", expected ", hex32(expected_magic),
                                 "; is it the right file (images vs labels) and not corrupt?"));
  }
  if (header[0] != 0 || header[1] != 0 || header[2] != 0x08 || header[3] == 0) {
    throw InvalidArgument(concat("IDX file ", path, " has magic number ", hex32(magic),
                                 ", which is not an unsigned-byte IDX file (expected 0x000008NN "
                                 "with NN >= 1 dimensions)"));
  }
  return header[3];
}

std::vector<int64_t> read_idx_dims(IdxSource& source, const std::string& path, int ndims) {
  std::vector<unsigned char> raw(4 * static_cast<size_t>(ndims));
  if (source.read(raw.data(), raw.size()) < raw.size()) {
    throw InvalidArgument(concat("IDX file ", path, " is truncated inside its header (", ndims,
                                 " dimensions announced)"));
  }
  std::vector<int64_t> dims(ndims);
  for (int i = 0; i < ndims; ++i) dims[i] = big_endian32(&raw[4 * i]);
  return dims;
}

// The product of the dimensions: the bytes of data. InvalidArgument when it does not fit a tensor
// (an int64 element count), which no real file comes near.
size_t data_bytes(const std::vector<int64_t>& dims, const std::string& path) {
  int64_t product = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(product, d, &product))
      throw InvalidArgument(concat("IDX file ", path, " announces ", idx_dims_text(dims),
                                   " bytes of data, more than a tensor can hold; is it corrupt?"));
  return static_cast<size_t>(product);
}

}  // namespace

std::string idx_dims_text(const std::vector<int64_t>& dims) {
  std::ostringstream out;
  for (size_t i = 0; i < dims.size(); ++i) out << (i ? " x " : "") << dims[i];
  return out.str();
}

IdxData read_idx_data(IdxSource& source, const std::string& path, uint32_t expected_magic) {
  IdxData out;
  const int ndims = read_idx_magic(source, path, expected_magic);
  out.dims = read_idx_dims(source, path, ndims);
  const size_t expected = data_bytes(out.dims, path);
  // Read in chunks, so that memory grows with the bytes the file really holds, not with what its
  // header announces (a corrupt 20-byte file may announce terabytes). The vector grows
  // geometrically, and gives back its slack once the data is all in.
  size_t got = 0;
  while (got < expected) {
    const size_t want = std::min(expected - got, kChunkBytes);
    out.bytes.resize(got + want);
    const size_t n = source.read(out.bytes.data() + got, want);
    got += n;
    if (n < want) break;
  }
  if (got < expected) {
    throw InvalidArgument(concat(
        "IDX file ", path, " is truncated: its header says ", idx_dims_text(out.dims), " = ",
        expected, " bytes of data, but it holds ", got,
        source.ended_early() ? " (the gzip stream ends early)" : "", "; download or reinstall it"));
  }
  out.bytes.shrink_to_fit();
  char extra[4096];
  const size_t trailing = source.read(extra, sizeof extra);
  if (trailing > 0) {
    throw InvalidArgument(concat(
        "IDX file ", path, " is longer than its header says: ", idx_dims_text(out.dims), " = ",
        expected, " bytes of data, then at least ", trailing, " more; is it corrupt?"));
  }
  return out;
}

}  // namespace lockstep::torch
