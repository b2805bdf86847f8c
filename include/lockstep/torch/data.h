// Distributed data loading for LibTorch: IDX files (MNIST, Fashion-MNIST), a Fashion-MNIST dataset,
// and a sampler that gives every rank its own shard of each epoch.
//
// [Sharding] DistributedSampler follows PyTorch's torch.utils.data.DistributedSampler:
//   1. The epoch's order is a permutation of [0, N) drawn from a generator seeded with
//      seed + epoch (identical on every rank), or [0, N) itself without shuffling.
//   2. Without drop_last the order is padded with its own first elements up to W * ceil(N / W);
//      with drop_last it is cut to W * floor(N / W).
//   3. Rank r takes every W-th element starting at r (interleaved shards).
// So the shards of one epoch are disjoint (up to the padding) and cover the dataset, and every rank
// gets the same number of samples, hence the same number of batches: no rank waits in a collective
// for a step another rank never takes. The shuffle is torch::randperm on a CPU generator, the same
// permutation PyTorch's sampler draws for the same seed and epoch.
//
// [Epochs] The loader advances the epoch itself: each begin() of a DistributedDataLoader (each
// reset() of the sampler) starts the next epoch. There is no set_epoch() to forget; a resumed job
// passes the epoch to start from as first_epoch.
//
// [Resume] A job saved in the middle of an epoch at world size W and resumed at world size M
// continues that epoch with the samples no rank has visited yet, then goes on as usual:
//   1. A pass visits a slice order[begin, end) of its epoch's order (a whole epoch: [0, N)),
//      padded or cut as in [Sharding] 2 with L = end - begin in place of N, and dealt as in 3.
//   2. With every rank `position` samples into its shard, the ranks together have visited the
//      first W * position slots of that padded or cut slice. What is left of the epoch, cursor(),
//      is order[begin + min(W * position, L'), begin + L'), where L' = L, or W * floor(L / W) with
//      drop_last (the cut-off part, which this epoch never visits, stays unvisited).
//   3. resume(cursor), at any world size M, makes the next reset() start the pass over that slice
//      (rule 1, with M), and the reset() after it epoch cursor.epoch + 1, whole. When nothing is
//      left (the epoch was used up, or only padding was left), the next reset() starts epoch
//      cursor.epoch + 1 directly; likewise when drop_last cuts all of what is left (fewer
//      samples than ranks).
// So the samples visited before the save and after the resume cover the epoch exactly once, up to
// the padding (or the cut, with drop_last) of each of the two passes, and every later epoch is the
// one an uninterrupted run draws. The ranks must stand at the same position (they do when they
// take the same number of batches of the same size, as DDP does).
//
// LibTorch's own torch::data::samplers::DistributedRandomSampler does not serve: it cuts the
// permutation into contiguous blocks, seeds with the epoch alone (no seed) and needs set_epoch().
#pragma once

#include <torch/data.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/comm/options.h"
#include "lockstep/core/error.h"
#include "lockstep/group/process_group.h"

namespace lockstep::torch {

// ---------------------------------------------------------------------------------------------
// IDX files
// ---------------------------------------------------------------------------------------------

// The magic numbers of the unsigned-byte IDX files MNIST-like datasets ship.
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // 1 dimension (N)
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // 3 dimensions (N, rows, cols)

struct IdxReadOptions {
  // The magic number the file must start with; 0 accepts any unsigned-byte IDX file.
  uint32_t expected_magic = 0;
};

// Reads an IDX file of unsigned bytes, gzip-compressed or not (zlib detects which), into a uint8
// tensor of the file's dimensions. Blocking file I/O; thread-safe.
// Errors (InvalidArgument, naming the file): missing or unreadable; a gzip stream that is corrupt
// or ends early; a magic number other than the expected one (both shown); a data section shorter
// or longer than the dimensions say (both sizes shown).
::torch::Tensor read_idx(const std::string& path, const IdxReadOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST
// ---------------------------------------------------------------------------------------------

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

enum class Split { train, test };

struct FashionMnistOptions {
  // Folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte, each with or without ".gz".
  std::string dir = kFashionMnistDir;
  Split split = Split::train;
  // Keep only the first `subset` samples; 0 keeps all of them.
  size_t subset = 0;
};

// Fashion-MNIST as a LibTorch dataset: each example is a normalized float image [1, 28, 28]
// ((x / 255 - mean) / std, with the training set's mean and std) and an int64 label in [0, 10).
// Reads both files at construction (about 50 MB for the training split). Copies share the tensors.
// Errors: InvalidArgument from read_idx, or when the two files disagree about the sample count.
class FashionMnist : public ::torch::data::datasets::Dataset<FashionMnist> {
 public:
  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;

  explicit FashionMnist(const FashionMnistOptions& options = {});

  ::torch::data::Example<> get(size_t index) override;
  ::torch::optional<size_t> size() const override;

  // All samples at once: images [N, 1, 28, 28] float32, targets [N] int64.
  const ::torch::Tensor& images() const { return images_; }
  const ::torch::Tensor& targets() const { return targets_; }

 private:
  ::torch::Tensor images_;
  ::torch::Tensor targets_;
};

// The path of one Fashion-MNIST file in dir: "<dir>/<name>.gz" if it exists, else "<dir>/<name>".
std::string fashion_mnist_file(const std::string& dir, const std::string& name);

// ---------------------------------------------------------------------------------------------
// Sharding
// ---------------------------------------------------------------------------------------------

struct ShardSpec {
  size_t dataset_size = 0;
  int rank = 0;
  int world_size = 1;
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool shuffle = true;
  bool drop_last = false;
};

// The number of samples each rank gets per epoch: ceil(N / W), or floor(N / W) with drop_last.
size_t shard_size(size_t dataset_size, int world_size, bool drop_last);

// Rank spec.rank's sample indices for spec.epoch, in the order it visits them (see [Sharding]).
// Pure and local: the same spec gives the same indices in every process.
// Errors: InvalidArgument for a rank outside [0, world_size) or an empty dataset.
std::vector<size_t> shard_indices(const ShardSpec& spec);

// Rank spec.rank's indices of the slice order[begin, end) of spec.epoch's order ([Resume] 1):
// the slice padded with its own first elements (or cut, with drop_last) to a multiple of the world
// size, then dealt. Empty when begin == end. shard_indices(spec) is the slice [0, N).
// Errors: InvalidArgument for a rank outside [0, world_size), or begin > end or end > N.
std::vector<size_t> shard_indices(const ShardSpec& spec, size_t begin, size_t end);

// What is left of an epoch, with what its order depends on ([Resume]); the same on every rank.
struct SamplerCursor {
  int64_t epoch = 0;
  // The unvisited positions [begin, end) of the epoch's order.
  uint64_t begin = 0;
  uint64_t end = 0;
  // The order's inputs, which resume() checks.
  uint64_t dataset_size = 0;
  uint64_t seed = 0;
  bool shuffle = true;
};

struct DistributedSamplerOptions {
  bool shuffle = true;
  // Base of every epoch's shuffle; the same on every rank.
  uint64_t seed = 0;
  // false: pad with the epoch's first samples so that every rank gets ceil(N / W) samples;
  // true: drop the epoch's last N mod W samples so that every rank gets floor(N / W).
  bool drop_last = false;
  // The epoch of the first pass (the first reset()); a job resumed after epoch e passes e + 1.
  int64_t first_epoch = 0;
  // Deadline of the dataset-size check at construction.
  std::chrono::milliseconds timeout = kGroupTimeout;
};

// A LibTorch sampler over this rank's shard (see [Sharding] and [Epochs]).
// Construction is collective over `group`: every rank passes its dataset size, and the sizes must
// match. A mismatch throws MismatchError on every rank, naming each rank's size.
// reset() starts the next epoch; next() hands out the shard in batches. Not thread-safe (the
// DataLoader calls it from one thread). Does not keep `group`.
class DistributedSampler : public ::torch::data::samplers::Sampler<> {
 public:
  DistributedSampler(size_t dataset_size, ProcessGroup& group,
                     const DistributedSamplerOptions& options = {});

  // Starts the next epoch (the first call starts options.first_epoch). A new_size other than the
  // dataset size is an InvalidArgument: sizes are checked across ranks only at construction.
  void reset(::torch::optional<size_t> new_size = ::torch::nullopt) override;
  // Up to batch_size indices of the current epoch's shard; nullopt when it is used up.
  ::torch::optional<std::vector<size_t>> next(size_t batch_size) override;
  // Saves / restores the epoch and the position in it (same world size only; across world sizes,
  // cursor() and resume()).
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;

  // What is left of the epoch in progress, over every rank ([Resume] 2): the same on every rank
  // when they stand at the same position. After resume(c) and before the next reset(), c. Before
  // the first reset(), epoch first_epoch - 1 with nothing left.
  SamplerCursor cursor() const;
  // Makes the next reset() continue cursor.epoch where cursor says, over this sampler's world size
  // ([Resume] 3); epoch() is then the epoch before the one the next reset() starts. Not
  // collective: every rank passes the same cursor. Errors: InvalidArgument when the cursor's
  // dataset size, seed or shuffle differ from this sampler's (another order), or its slice is not
  // inside [0, N).
  void resume(const SamplerCursor& cursor);

  // The epoch of the pass in progress; first_epoch - 1 before the first reset().
  int64_t epoch() const { return spec_.epoch; }
  // Samples this rank gets per epoch (the same on every rank).
  size_t samples_per_epoch() const {
    return shard_size(spec_.dataset_size, spec_.world_size, spec_.drop_last);
  }

 private:
  ShardSpec spec_;
  std::vector<size_t> indices_;
  size_t position_ = 0;
  // The slice of the epoch's order this pass visits ([Resume] 1); [N, N) before the first pass.
  size_t pass_begin_ = 0;
  size_t pass_end_ = 0;
  // Set by resume(): the pass the next reset() starts.
  std::optional<SamplerCursor> resume_;

  // Whether `rest` leaves this rank any sample to visit ([Resume] 3).
  bool resumes_a_pass(const SamplerCursor& rest) const;
};

// Checks that `local_size` is the same on every rank of `group` (collective, one all_gather).
// Throws MismatchError naming each rank's size, prefixed by `what` (e.g. "dataset size").
void check_same_size_across_ranks(ProcessGroup& group, size_t local_size, const std::string& what,
                                  std::chrono::milliseconds timeout = kGroupTimeout);

// ---------------------------------------------------------------------------------------------
// The loader
// ---------------------------------------------------------------------------------------------

struct DistributedLoaderOptions {
  size_t batch_size = 64;  // per rank
  // Worker threads that prepare batches ahead; 0 prepares them on the calling thread. With
  // workers, the sampler runs ahead of the batches handed out (by the batches being prepared), so
  // a mid-epoch checkpoint of sampler().cursor() needs 0.
  size_t workers = 0;
  DistributedSamplerOptions sampler{};
};

// What LibTorch's loader holds in place of the sampler: it forwards to the DistributedSampler
// that DistributedDataLoader keeps, so that the sampler stays reachable (cursor(), resume()) once
// the loader owns its copy. Copies share the one sampler.
class SharedSampler : public ::torch::data::samplers::Sampler<> {
 public:
  explicit SharedSampler(std::shared_ptr<DistributedSampler> sampler)
      : sampler_(std::move(sampler)) {}
  void reset(::torch::optional<size_t> new_size = ::torch::nullopt) override {
    sampler_->reset(new_size);
  }
  ::torch::optional<std::vector<size_t>> next(size_t batch_size) override {
    return sampler_->next(batch_size);
  }
  void save(::torch::serialize::OutputArchive& archive) const override { sampler_->save(archive); }
  void load(::torch::serialize::InputArchive& archive) override { sampler_->load(archive); }

 private:
  std::shared_ptr<DistributedSampler> sampler_;
};

// A LibTorch data loader over this rank's shard of `dataset`, e.g.
//   DistributedDataLoader loader(FashionMnist().map(torch::data::transforms::Stack<>()), *pg);
//   for (int e = 0; e < epochs; ++e)
//     for (auto& batch : loader) { ... }   // each `for` is one epoch, reshuffled
// Construction is collective (the dataset-size check). Every rank yields the same number of
// batches per epoch. Not thread-safe; one pass at a time. A job that checkpoints in the middle of
// an epoch saves sampler() (checkpoint.h, sharded_checkpoint.h): after k batches of b samples its
// cursor() has each rank k * b samples into its shard, and once restored, the next pass yields
// the rest of that epoch ([Resume]).
template <class Dataset>
class DistributedDataLoader {
 public:
  using Loader = ::torch::data::StatelessDataLoader<Dataset, SharedSampler>;

  DistributedDataLoader(Dataset dataset, ProcessGroup& group,
                        const DistributedLoaderOptions& options = {})
      : batch_size_(options.batch_size) {
    const auto size = dataset.size();
    if (!size.has_value()) throw InvalidArgument("DistributedDataLoader: the dataset has no size");
    sampler_ = std::make_shared<DistributedSampler>(*size, group, options.sampler);
    samples_per_epoch_ = sampler_->samples_per_epoch();
    loader_ = std::make_unique<Loader>(
        std::move(dataset), SharedSampler(sampler_),
        ::torch::data::DataLoaderOptions().batch_size(options.batch_size).workers(options.workers));
  }

  // Starts the next epoch and returns an iterator to its first batch.
  auto begin() { return loader_->begin(); }
  auto end() { return loader_->end(); }

  // The epoch of the pass in progress (first_epoch - 1 before the first begin()).
  int64_t epoch() const { return sampler_->epoch(); }
  size_t samples_per_epoch() const { return samples_per_epoch_; }
  size_t batches_per_epoch() const { return (samples_per_epoch_ + batch_size_ - 1) / batch_size_; }
  // The sampler the loader draws from, for checkpoints.
  DistributedSampler& sampler() { return *sampler_; }

 private:
  size_t batch_size_;
  size_t samples_per_epoch_ = 0;
  std::shared_ptr<DistributedSampler> sampler_;
  std::unique_ptr<Loader> loader_;
};

}  // namespace lockstep::torch
