// Distributed data loading: the IDX reader, Fashion-MNIST and the distributed sampler (one LibTorch
// translation unit: each costs about a minute to compile on 2 cores).
#include "lockstep/torch/data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::torch {
namespace {

using detail::concat;

std::string hex32(uint32_t value) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << value;
  return out.str();
}

// An open gzip (or plain) file that names itself in every error.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw InvalidArgument(concat("IDX file ", path, " does not exist or is not a regular file; ",
                                   "check the data folder (for Fashion-MNIST: apt-get install ",
                                   "dataset-fashion-mnist)"));
    }
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      throw InvalidArgument(concat("cannot open IDX file ", path, ": ", std::strerror(errno)));
    }
    gzbuffer(file_, 1 << 20);
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to `bytes` bytes; returns how many it got (fewer only at the end of the data).
  size_t read(void* out, size_t bytes) {
    size_t got = 0;
    auto* dst = static_cast<char*>(out);
    while (got < bytes) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - got, 1u << 30));
      const int n = gzread(file_, dst + got, chunk);
      if (n > 0) got += static_cast<size_t>(n);
      if (stream_ended_early() || n <= 0) break;
    }
    return got;
  }

  // Whether the gzip stream was cut off (the data read so far is good, then it stops).
  bool ended_early() const { return ended_early_; }

 private:
  // Throws on corrupt data; returns true when the stream ended before its trailer.
  bool stream_ended_early() {
    int errnum = Z_OK;
    gzerror(file_, &errnum);
    if (errnum == Z_BUF_ERROR)
      ended_early_ = true;
    else if (errnum != Z_OK)
      throw_stream_error();
    return ended_early_;
  }

  [[noreturn]] void throw_stream_error() {
    int errnum = Z_OK;
    const char* message = gzerror(file_, &errnum);
    throw InvalidArgument(concat("IDX file ", path_, " is corrupt: zlib says \"", message,
                                 "\" (zlib error ", errnum, "); download or reinstall it"));
  }

  std::string path_;
  gzFile file_ = nullptr;
  bool ended_early_ = false;
};

uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::ostringstream out;
  for (size_t i = 0; i < dims.size(); ++i) out << (i ? " x " : "") << dims[i];
  return out.str();
}

// Reads and checks the magic number; returns the number of dimensions.
int read_idx_magic(GzFile& file, const std::string& path, const IdxReadOptions& options) {
  unsigned char header[4];
  const size_t got = file.read(header, 4);
  if (got < 4) {
    throw InvalidArgument(concat("IDX file ", path, " is truncated: ", got,
                                 " bytes, fewer than the 4-byte magic number"));
  }
  const uint32_t magic = big_endian32(header);
  if (options.expected_magic != 0 && magic != options.expected_magic) {
    throw InvalidArgument(concat("IDX file ", path, " starts with magic number ", hex32(magic),
                                 ", expected ", hex32(options.expected_magic),
                                 "; is it the right file (images vs labels) and not corrupt?"));
  }
  if (header[0] != 0 || header[1] != 0 || header[2] != 0x08 || header[3] == 0) {
    throw InvalidArgument(concat("IDX file ", path, " has magic number ", hex32(magic),
                                 ", which is not an unsigned-byte IDX file (expected 0x000008NN "
                                 "with NN >= 1 dimensions)"));
  }
  return header[3];
}

std::vector<int64_t> read_idx_dims(GzFile& file, const std::string& path, int ndims) {
  std::vector<unsigned char> raw(4 * static_cast<size_t>(ndims));
  if (file.read(raw.data(), raw.size()) < raw.size()) {
    throw InvalidArgument(concat("IDX file ", path, " is truncated inside its header (", ndims,
                                 " dimensions announced)"));
  }
  std::vector<int64_t> dims(ndims);
  for (int i = 0; i < ndims; ++i) dims[i] = big_endian32(&raw[4 * i]);
  return dims;
}

}  // namespace

::torch::Tensor read_idx(const std::string& path, const IdxReadOptions& options) {
  GzFile file(path);
  const int ndims = read_idx_magic(file, path, options);
  const std::vector<int64_t> dims = read_idx_dims(file, path, ndims);
  auto tensor = ::torch::empty(dims, ::torch::kUInt8);
  const size_t expected = static_cast<size_t>(tensor.numel());
  const size_t got = file.read(tensor.data_ptr<uint8_t>(), expected);
  if (got < expected) {
    throw InvalidArgument(concat("IDX file ", path, " is truncated: its header says ",
                                 dims_text(dims), " = ", expected, " bytes of data, but it holds ",
                                 got, file.ended_early() ? " (the gzip stream ends early)" : "",
                                 "; download or reinstall it"));
  }
  char extra[4096];
  const size_t trailing = file.read(extra, sizeof extra);
  if (trailing > 0) {
    throw InvalidArgument(
        concat("IDX file ", path, " is longer than its header says: ", dims_text(dims), " = ",
               expected, " bytes of data, then at least ", trailing, " more; is it corrupt?"));
  }
  return tensor;
}

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST

std::string fashion_mnist_file(const std::string& dir, const std::string& name) {
  const std::string plain = (std::filesystem::path(dir) / name).string();
  std::error_code ec;
  if (std::filesystem::exists(plain + ".gz", ec)) return plain + ".gz";
  if (std::filesystem::exists(plain, ec)) return plain;
  throw InvalidArgument(concat("Fashion-MNIST file ", name, " not found: neither ", plain,
                               ".gz nor ", plain,
                               " exists. Install Debian's dataset-fashion-mnist ",
                               "(apt-get install dataset-fashion-mnist, files in ",
                               kFashionMnistDir, ") or point the data folder at a copy"));
}

FashionMnist::FashionMnist(const FashionMnistOptions& options) {
  const std::string prefix = options.split == Split::train ? "train" : "t10k";
  const std::string images_path = fashion_mnist_file(options.dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = fashion_mnist_file(options.dir, prefix + "-labels-idx1-ubyte");
  auto images = read_idx(images_path, {.expected_magic = kIdxImagesMagic});
  auto labels = read_idx(labels_path, {.expected_magic = kIdxLabelsMagic});
  if (images.size(0) != labels.size(0)) {
    throw InvalidArgument(concat("Fashion-MNIST files disagree: ", images_path, " holds ",
                                 images.size(0), " images but ", labels_path, " holds ",
                                 labels.size(0), " labels"));
  }
  const auto count = static_cast<size_t>(images.size(0));
  if (options.subset > count) {
    throw InvalidArgument(concat("Fashion-MNIST subset of ", options.subset, " samples asked for, ",
                                 "but ", images_path, " holds only ", count));
  }
  const int64_t keep = static_cast<int64_t>(options.subset == 0 ? count : options.subset);
  images_ = images.narrow(0, 0, keep)
                .to(::torch::kFloat32)
                .div_(255.0)
                .sub_(kMean)
                .div_(kStd)
                .unsqueeze(1)
                .contiguous();
  targets_ = labels.narrow(0, 0, keep).to(::torch::kInt64);
}

::torch::data::Example<> FashionMnist::get(size_t index) {
  return {images_[static_cast<int64_t>(index)], targets_[static_cast<int64_t>(index)]};
}

::torch::optional<size_t> FashionMnist::size() const {
  return static_cast<size_t>(images_.size(0));
}

// ---------------------------------------------------------------------------------------------
// Sharding

size_t shard_size(size_t dataset_size, int world_size, bool drop_last) {
  const auto world = static_cast<size_t>(world_size);
  return drop_last ? dataset_size / world : (dataset_size + world - 1) / world;
}

std::vector<size_t> shard_indices(const ShardSpec& spec) {
  LOCKSTEP_ENFORCE(spec.world_size >= 1 && spec.rank >= 0 && spec.rank < spec.world_size,
                   InvalidArgument, "shard_indices: rank ", spec.rank,
                   " is outside a world of size ", spec.world_size);
  LOCKSTEP_ENFORCE(spec.dataset_size > 0, InvalidArgument,
                   "shard_indices: the dataset is empty; there is nothing to shard");
  const auto n = static_cast<int64_t>(spec.dataset_size);
  ::torch::Tensor order;
  if (spec.shuffle) {
    // Same generator and draw as PyTorch's DistributedSampler: manual_seed(seed + epoch).
    auto generator =
        at::make_generator<at::CPUGeneratorImpl>(spec.seed + static_cast<uint64_t>(spec.epoch));
    order = ::torch::randperm(n, generator, ::torch::kInt64);
  } else {
    order = ::torch::arange(n, ::torch::kInt64);
  }
  const int64_t* base = order.data_ptr<int64_t>();
  const size_t count = shard_size(spec.dataset_size, spec.world_size, spec.drop_last);
  std::vector<size_t> indices(count);
  for (size_t j = 0; j < count; ++j) {
    // Element rank + j*W of the order padded (cyclically) or cut to W * count elements.
    const size_t slot = static_cast<size_t>(spec.rank) + j * static_cast<size_t>(spec.world_size);
    indices[j] = static_cast<size_t>(base[slot % spec.dataset_size]);
  }
  return indices;
}

void check_same_size_across_ranks(ProcessGroup& group, size_t local_size, const std::string& what,
                                  std::chrono::milliseconds timeout) {
  const auto world = static_cast<size_t>(group.size());
  const int64_t mine = static_cast<int64_t>(local_size);
  std::vector<int64_t> all(world);
  group.all_gather(ConstBufferView(&mine, 1, DType::i64), view(all), {.timeout = timeout})->wait();
  bool same = true;
  for (int64_t size : all) same = same && size == all[0];
  if (same) return;
  std::ostringstream sizes;
  for (size_t r = 0; r < world; ++r) sizes << (r ? ", " : "") << "rank " << r << ": " << all[r];
  throw MismatchError(concat(what, " differs across the ranks of group ", group.name(), " (",
                             sizes.str(), "; this is rank ", group.rank(),
                             "). Every rank must load the same dataset (same files, same subset) "
                             "and let DistributedSampler shard it"));
}

DistributedSampler::DistributedSampler(size_t dataset_size, ProcessGroup& group,
                                       const DistributedSamplerOptions& options)
    : spec_{.dataset_size = dataset_size,
            .rank = group.rank(),
            .world_size = group.size(),
            .seed = options.seed,
            .epoch = options.first_epoch - 1,
            .shuffle = options.shuffle,
            .drop_last = options.drop_last},
      epoch_(std::make_shared<int64_t>(options.first_epoch - 1)) {
  check_same_size_across_ranks(group, dataset_size, "dataset size", options.timeout);
  LOCKSTEP_ENFORCE(dataset_size > 0, InvalidArgument, "DistributedSampler: the dataset is empty");
  LOCKSTEP_ENFORCE(samples_per_epoch() > 0, InvalidArgument, "DistributedSampler: with drop_last, ",
                   "a dataset of ", dataset_size, " samples gives nothing to each of ",
                   group.size(), " ranks; use fewer ranks or drop_last = false (padding)");
}

void DistributedSampler::reset(::torch::optional<size_t> new_size) {
  LOCKSTEP_ENFORCE(!new_size.has_value() || *new_size == spec_.dataset_size, InvalidArgument,
                   "DistributedSampler::reset: new size ", new_size.value_or(0),
                   " differs from the dataset size ", spec_.dataset_size,
                   " checked across ranks; build a new sampler for a new dataset");
  spec_.epoch = ++*epoch_;
  indices_ = shard_indices(spec_);
  position_ = 0;
}

::torch::optional<std::vector<size_t>> DistributedSampler::next(size_t batch_size) {
  if (position_ >= indices_.size()) return ::torch::nullopt;
  const size_t end = std::min(indices_.size(), position_ + batch_size);
  std::vector<size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(position_),
                            indices_.begin() + static_cast<std::ptrdiff_t>(end));
  position_ = end;
  return batch;
}

void DistributedSampler::save(::torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", ::torch::tensor(spec_.epoch, ::torch::kInt64), /*is_buffer=*/true);
  archive.write("position", ::torch::tensor(static_cast<int64_t>(position_), ::torch::kInt64),
                /*is_buffer=*/true);
}

void DistributedSampler::load(::torch::serialize::InputArchive& archive) {
  auto epoch = ::torch::empty({}, ::torch::kInt64);
  auto position = ::torch::empty({}, ::torch::kInt64);
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  spec_.epoch = *epoch_ = epoch.item<int64_t>();
  indices_ = shard_indices(spec_);
  position_ = std::min(static_cast<size_t>(position.item<int64_t>()), indices_.size());
}

}  // namespace lockstep::torch
