// Distributed data loading: the IDX reader, Fashion-MNIST and the distributed sampler (one LibTorch
// translation unit: each costs about a minute to compile on 2 cores).
#include "lockstep/torch/data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "lockstep/core/error.h"
#include "torch/idx_format.h"

namespace lockstep::torch {
namespace {

using detail::concat;

// An open gzip (or plain) file that names itself in every error.
class GzFile : public IdxSource {
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
  ~GzFile() override { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to `bytes` bytes; returns how many it got (fewer only at the end of the data).
  size_t read(void* out, size_t bytes) override {
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
  bool ended_early() const override { return ended_early_; }

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

}  // namespace

::torch::Tensor read_idx(const std::string& path, const IdxReadOptions& options) {
  GzFile file(path);
  auto data = std::make_unique<IdxData>(read_idx_data(file, path, options.expected_magic));
  if (data->bytes.empty()) return ::torch::empty(data->dims, ::torch::kUInt8);
  // The tensor takes the bytes over, without a copy: its deleter frees them.
  void* bytes = data->bytes.data();
  const std::vector<int64_t> dims = data->dims;
  return ::torch::from_blob(
      bytes, dims, [owner = data.release()](void*) { delete owner; }, ::torch::kUInt8);
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
  return shard_indices(spec, 0, spec.dataset_size);
}

std::vector<size_t> shard_indices(const ShardSpec& spec, size_t begin, size_t end) {
  LOCKSTEP_ENFORCE(spec.world_size >= 1 && spec.rank >= 0 && spec.rank < spec.world_size,
                   InvalidArgument, "shard_indices: rank ", spec.rank,
                   " is outside a world of size ", spec.world_size);
  LOCKSTEP_ENFORCE(begin <= end && end <= spec.dataset_size, InvalidArgument,
                   "shard_indices: the slice [", begin, ", ", end,
                   ") is not inside the epoch's order [0, ", spec.dataset_size, ")");
  const size_t length = end - begin;
  if (length == 0) return {};
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
  const int64_t* base = order.data_ptr<int64_t>() + begin;
  const size_t count = shard_size(length, spec.world_size, spec.drop_last);
  std::vector<size_t> indices(count);
  for (size_t j = 0; j < count; ++j) {
    // Element rank + j*W of the slice padded (cyclically) or cut to W * count elements.
    const size_t slot = static_cast<size_t>(spec.rank) + j * static_cast<size_t>(spec.world_size);
    indices[j] = static_cast<size_t>(base[slot % length]);
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
      pass_begin_(dataset_size),
      pass_end_(dataset_size) {
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
  position_ = 0;
  if (resume_.has_value()) {
    const SamplerCursor rest = *resume_;
    resume_.reset();
    if (resumes_a_pass(rest)) {  // [Resume] 3: the rest of rest.epoch
      spec_.epoch = rest.epoch;
      pass_begin_ = static_cast<size_t>(rest.begin);
      pass_end_ = static_cast<size_t>(rest.end);
      indices_ = shard_indices(spec_, pass_begin_, pass_end_);
      return;
    }
  }
  ++spec_.epoch;
  pass_begin_ = 0;
  pass_end_ = spec_.dataset_size;
  indices_ = shard_indices(spec_);
}

bool DistributedSampler::resumes_a_pass(const SamplerCursor& rest) const {
  return rest.begin < rest.end && shard_size(static_cast<size_t>(rest.end - rest.begin),
                                             spec_.world_size, spec_.drop_last) > 0;
}

SamplerCursor DistributedSampler::cursor() const {
  if (resume_.has_value()) return *resume_;
  const size_t world = static_cast<size_t>(spec_.world_size);
  const size_t length = pass_end_ - pass_begin_;
  const size_t visitable = spec_.drop_last ? world * (length / world) : length;
  const size_t visited = std::min(world * position_, visitable);
  return {.epoch = spec_.epoch,
          .begin = pass_begin_ + visited,
          .end = pass_begin_ + visitable,
          .dataset_size = spec_.dataset_size,
          .seed = spec_.seed,
          .shuffle = spec_.shuffle};
}

void DistributedSampler::resume(const SamplerCursor& cursor) {
  LOCKSTEP_ENFORCE(cursor.dataset_size == spec_.dataset_size && cursor.seed == spec_.seed &&
                       cursor.shuffle == spec_.shuffle,
                   InvalidArgument, "DistributedSampler::resume: the cursor is of another order (",
                   cursor.dataset_size, " samples, seed ", cursor.seed,
                   cursor.shuffle ? ", shuffled" : ", not shuffled", ") than this sampler's (",
                   spec_.dataset_size, " samples, seed ", spec_.seed,
                   spec_.shuffle ? ", shuffled" : ", not shuffled",
                   "); resume with the dataset and sampler options of the saved job");
  LOCKSTEP_ENFORCE(cursor.begin <= cursor.end && cursor.end <= spec_.dataset_size, InvalidArgument,
                   "DistributedSampler::resume: the cursor's slice [", cursor.begin, ", ",
                   cursor.end, ") is not inside [0, ", spec_.dataset_size, ")");
  resume_ = cursor;
  // The next reset() starts epoch() + 1 in either case ([Resume] 3).
  spec_.epoch = resumes_a_pass(cursor) ? cursor.epoch - 1 : cursor.epoch;
  indices_.clear();
  position_ = 0;
  pass_begin_ = pass_end_ = spec_.dataset_size;
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
  if (pass_begin_ != 0 || pass_end_ != spec_.dataset_size) {  // a resumed pass ([Resume])
    archive.write("pass_begin", ::torch::tensor(static_cast<int64_t>(pass_begin_)),
                  /*is_buffer=*/true);
    archive.write("pass_end", ::torch::tensor(static_cast<int64_t>(pass_end_)),
                  /*is_buffer=*/true);
  }
}

void DistributedSampler::load(::torch::serialize::InputArchive& archive) {
  auto epoch = ::torch::empty({}, ::torch::kInt64);
  auto position = ::torch::empty({}, ::torch::kInt64);
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  auto pass_begin = ::torch::zeros({}, ::torch::kInt64);
  auto pass_end = ::torch::full({}, static_cast<int64_t>(spec_.dataset_size), ::torch::kInt64);
  archive.try_read("pass_begin", pass_begin, /*is_buffer=*/true);
  archive.try_read("pass_end", pass_end, /*is_buffer=*/true);
  spec_.epoch = epoch.item<int64_t>();
  resume_.reset();
  pass_begin_ = static_cast<size_t>(pass_begin.item<int64_t>());
  pass_end_ = static_cast<size_t>(pass_end.item<int64_t>());
  indices_ = shard_indices(spec_, pass_begin_, pass_end_);
  position_ = std::min(static_cast<size_t>(position.item<int64_t>()), indices_.size());
}

}  // namespace lockstep::torch
