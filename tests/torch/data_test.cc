// Distributed data loading: sharding, the sampler and the loader over real groups, IDX files and
// the Fashion-MNIST dataset. (Checkpoints and the main job's training run: checkpoint_test.cc.
// Each LibTorch translation unit costs about a minute to compile: keep them few.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/torch/checkpoint.h"
#include "lockstep/torch/data.h"
#include "support/messages.h"
#include "support/spawn.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace lockstep::torch {
namespace {

namespace fs = std::filesystem;
using lockstep::testing::contains;
using lockstep::testing::message_of;
using lockstep::testing::read_file;
using lockstep::testing::spawn_groups;
using lockstep::testing::TempDir;
using lockstep::testing::write_file;

// ---------------------------------------------------------------------------------------------
// Sharding

std::vector<size_t> shard(size_t n, int rank, int world, bool drop_last, uint64_t seed = 0,
                          int64_t epoch = 0, bool shuffle = true) {
  return shard_indices({.dataset_size = n,
                        .rank = rank,
                        .world_size = world,
                        .seed = seed,
                        .epoch = epoch,
                        .shuffle = shuffle,
                        .drop_last = drop_last});
}

TEST(ShardIndices, DisjointAndCoveringWithPadding) {
  for (int world : {1, 2, 3, 4, 7, 8}) {
    for (size_t n : {1, 2, 7, 10, 64, 1001}) {
      std::map<size_t, int> seen;
      const size_t per_rank = (n + world - 1) / world;
      for (int r = 0; r < world; ++r) {
        const auto indices = shard(n, r, world, /*drop_last=*/false, 3, 1);
        ASSERT_EQ(indices.size(), per_rank) << "n=" << n << " world=" << world;
        for (size_t i : indices) ++seen[i];
      }
      ASSERT_EQ(seen.size(), n) << "every sample is visited, n=" << n << " world=" << world;
      size_t duplicates = 0;
      for (const auto& [index, count] : seen) duplicates += count - 1;
      EXPECT_EQ(duplicates, per_rank * world - n) << "only the padding repeats samples";
    }
  }
}

TEST(ShardIndices, DisjointWithDropLast) {
  for (int world : {1, 2, 3, 5, 8}) {
    for (size_t n : {8, 10, 64, 1001}) {
      std::set<size_t> seen;
      for (int r = 0; r < world; ++r) {
        const auto indices = shard(n, r, world, /*drop_last=*/true);
        ASSERT_EQ(indices.size(), n / world);
        for (size_t i : indices) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " twice";
      }
      EXPECT_EQ(seen.size(), n / world * world);
    }
  }
}

TEST(ShardIndices, InterleavedLikePyTorch) {
  // PyTorch: indices += indices[:padding]; indices[rank:total:world].
  EXPECT_EQ(shard(10, 0, 3, false, 0, 0, false), (std::vector<size_t>{0, 3, 6, 9}));
  EXPECT_EQ(shard(10, 1, 3, false, 0, 0, false), (std::vector<size_t>{1, 4, 7, 0}));
  EXPECT_EQ(shard(10, 2, 3, false, 0, 0, false), (std::vector<size_t>{2, 5, 8, 1}));
  EXPECT_EQ(shard(10, 2, 3, true, 0, 0, false), (std::vector<size_t>{2, 5, 8}));
  EXPECT_EQ(shard(2, 3, 5, false, 0, 0, false), (std::vector<size_t>{1}));  // padding wraps twice
}

TEST(ShardIndices, ShuffleMatchesPyTorchDistributedSampler) {
  // Reference run: torch.utils.data.DistributedSampler(range(10), num_replicas=W, rank=r,
  // seed=S, drop_last=D) with set_epoch(E), PyTorch 1.13.
  const std::vector<std::vector<size_t>> s0e0 = {{4, 5, 0, 2}, {1, 3, 8, 4}, {7, 9, 6, 1}};
  const std::vector<std::vector<size_t>> s0e1 = {{5, 2, 9, 4}, {6, 0, 3, 5}, {1, 8, 7, 6}};
  const std::vector<std::vector<size_t>> s7e2 = {{0, 6}, {5, 2}, {8, 9}, {7, 1}};
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(shard(10, r, 3, false, 0, 0), s0e0[r]) << "rank " << r;
    EXPECT_EQ(shard(10, r, 3, false, 0, 1), s0e1[r]) << "rank " << r;
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(shard(10, r, 4, true, 7, 2), s7e2[r]) << "rank " << r;
}

TEST(ShardIndices, EpochReshufflesAndSeedPlusEpochDecides) {
  EXPECT_NE(shard(1000, 0, 2, false, 0, 0), shard(1000, 0, 2, false, 0, 1));
  EXPECT_EQ(shard(1000, 1, 2, false, 5, 3), shard(1000, 1, 2, false, 5, 3));
  EXPECT_EQ(shard(1000, 1, 2, false, 4, 4), shard(1000, 1, 2, false, 5, 3));  // seed + epoch
}

TEST(ShardIndices, RejectsBadRankAndEmptyDataset) {
  EXPECT_CONTAINS(message_of<Error>([] { shard(10, 2, 2, false); }),
                  "rank 2 is outside a world of size 2");
  EXPECT_CONTAINS(message_of<Error>([] { shard(0, 0, 2, false); }), "empty");
}

// ---------------------------------------------------------------------------------------------
// The sampler and the loader, over real groups (ranks as threads)

// Sample i is the tensor {i}.
struct IndexDataset : ::torch::data::datasets::Dataset<IndexDataset> {
  explicit IndexDataset(size_t n) : n(n) {}
  ::torch::data::Example<> get(size_t i) override {
    return {::torch::tensor(static_cast<int64_t>(i)), ::torch::tensor(0)};
  }
  ::torch::optional<size_t> size() const override { return n; }
  size_t n;
};

TEST(DistributedSampler, LoaderAdvancesTheEpochItself) {
  constexpr int kWorld = 3;
  std::mutex mu;
  std::map<int, std::vector<std::vector<int64_t>>> visits;  // rank -> epoch -> samples
  spawn_groups(kWorld, [&](ProcessGroup& pg) {
    using Data =
        ::torch::data::datasets::MapDataset<IndexDataset, ::torch::data::transforms::Stack<>>;
    DistributedDataLoader<Data> loader(
        IndexDataset(10).map(::torch::data::transforms::Stack<>()), pg,
        {.batch_size = 3, .sampler = {.seed = 11, .first_epoch = 4}});
    EXPECT_EQ(loader.epoch(), 3);
    EXPECT_EQ(loader.samples_per_epoch(), 4u);
    EXPECT_EQ(loader.batches_per_epoch(), 2u);
    for (int e = 0; e < 2; ++e) {
      std::vector<int64_t> seen;
      size_t batches = 0;
      for (auto& batch : loader) {
        ++batches;
        for (int64_t i = 0; i < batch.data.size(0); ++i)
          seen.push_back(batch.data[i].item<int64_t>());
      }
      EXPECT_EQ(batches, 2u);
      EXPECT_EQ(loader.epoch(), 4 + e);
      const auto expected = shard(10, pg.rank(), kWorld, false, 11, 4 + e);
      EXPECT_EQ(seen, std::vector<int64_t>(expected.begin(), expected.end())) << "epoch " << 4 + e;
      std::lock_guard<std::mutex> lock(mu);
      visits[pg.rank()].push_back(seen);
    }
  });
  EXPECT_NE(visits[0][0], visits[0][1]) << "the second pass is reshuffled";
}

TEST(DistributedSampler, DatasetSizeMismatchNamesEveryRank) {
  std::mutex mu;
  std::map<int, std::string> errors;
  spawn_groups(3, [&](ProcessGroup& pg) {
    const size_t size = pg.rank() == 2 ? 59999 : 60000;
    try {
      DistributedSampler sampler(size, pg);
    } catch (const MismatchError& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors[pg.rank()] = e.what();
    }
  });
  ASSERT_EQ(errors.size(), 3u) << "every rank fails at construction";
  for (const auto& [rank, text] : errors) {
    EXPECT_CONTAINS(text, "dataset size differs");
    EXPECT_CONTAINS(text, "rank 0: 60000, rank 1: 60000, rank 2: 59999");
    EXPECT_CONTAINS(text, "this is rank " + std::to_string(rank));
  }
}

TEST(DistributedSampler, DropLastCountsAndTooSmallDataset) {
  spawn_groups(4, [&](ProcessGroup& pg) {
    DistributedSampler padded(10, pg, {.drop_last = false});
    DistributedSampler dropped(10, pg, {.drop_last = true});
    EXPECT_EQ(padded.samples_per_epoch(), 3u);
    EXPECT_EQ(dropped.samples_per_epoch(), 2u);
    dropped.reset();
    EXPECT_EQ(dropped.next(5)->size(), 2u);
    EXPECT_FALSE(dropped.next(5).has_value());
    EXPECT_CONTAINS(message_of<Error>([&] { DistributedSampler tiny(3, pg, {.drop_last = true}); }),
                    "gives nothing to each of 4 ranks");
    EXPECT_CONTAINS(message_of<Error>([&] { padded.reset(11); }), "new size 11");
  });
}

// ---------------------------------------------------------------------------------------------
// IDX files

std::string idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string out;
  auto put = [&](uint32_t v) {
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return out + data;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string ramp(size_t n) {
  std::string data(n, '\0');
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 7 % 256);
  return data;
}

TEST(Idx, ReadsGzipAndPlainFiles) {
  TempDir dir;
  const std::string bytes = idx_bytes(0x0803, {2, 3, 4}, ramp(24));
  write_gz(dir.file("a.gz"), bytes);
  write_file(dir.file("a"), bytes);
  for (const char* name : {"a.gz", "a"}) {
    const auto t = read_idx(dir.file(name), {.expected_magic = kIdxImagesMagic});
    ASSERT_EQ(t.sizes(), (std::vector<int64_t>{2, 3, 4})) << name;
    ASSERT_EQ(t.scalar_type(), ::torch::kUInt8);
    for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(t.flatten()[i].item<int>(), i * 7 % 256) << name;
  }
}

TEST(Idx, ErrorsNameTheFileAndTheSizes) {
  TempDir dir;
  EXPECT_CONTAINS(message_of<Error>([&] { read_idx(dir.file("missing.gz")); }),
                  dir.file("missing.gz") + " does not exist");
  write_gz(dir.file("labels.gz"), idx_bytes(0x0801, {5}, ramp(5)));
  const std::string wrong = message_of<Error>(
      [&] { read_idx(dir.file("labels.gz"), {.expected_magic = kIdxImagesMagic}); });
  EXPECT_CONTAINS(wrong, dir.file("labels.gz"));
  EXPECT_CONTAINS(wrong, "magic number 0x00000801, expected 0x00000803");
  write_file(dir.file("short"), idx_bytes(0x0803, {2, 3, 4}, ramp(10)));
  EXPECT_CONTAINS(
      message_of<Error>([&] { read_idx(dir.file("short")); }),
      "short is truncated: its header says 2 x 3 x 4 = 24 bytes of data, but it holds 10");
  write_file(dir.file("long"), idx_bytes(0x0801, {3}, ramp(5)));
  EXPECT_CONTAINS(message_of<Error>([&] { read_idx(dir.file("long")); }),
                  "long is longer than its header says");
  write_file(dir.file("float"), idx_bytes(0x0D01, {3}, ramp(12)));
  EXPECT_CONTAINS(message_of<Error>([&] { read_idx(dir.file("float")); }),
                  "not an unsigned-byte IDX file");
}

TEST(Idx, TruncatedAndCorruptGzip) {
  TempDir dir;
  write_gz(dir.file("big.gz"), idx_bytes(0x0803, {100, 28, 28}, ramp(78400)));
  const std::string gz = read_file(dir.file("big.gz"));
  write_file(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  const std::string cut = message_of<Error>([&] { read_idx(dir.file("cut.gz")); });
  EXPECT_CONTAINS(
      cut, dir.file("cut.gz") + " is truncated: its header says 100 x 28 x 28 = 78400 bytes");
  EXPECT_CONTAINS(cut, "gzip stream ends early");
  std::string flipped = gz;
  for (size_t i = flipped.size() / 3; i < flipped.size() / 3 + 16; ++i)
    flipped[i] = static_cast<char>(~flipped[i]);
  write_file(dir.file("bad.gz"), flipped);
  const std::string bad = message_of<Error>([&] { read_idx(dir.file("bad.gz")); });
  EXPECT_CONTAINS(bad, dir.file("bad.gz"));
  EXPECT_TRUE(contains(bad, "corrupt") || contains(bad, "longer") || contains(bad, "truncated"))
      << bad;
}

// Found by fuzz/idx_fuzz.cc: the reader allocated what the header announces before reading any
// data, so a file of a few bytes announcing 4 GB took 4 GB, and one announcing 562 TB or 2^96
// bytes threw LibTorch's c10::Error ("not enough memory", "Storage size calculation overflowed")
// instead of InvalidArgument.
TEST(Idx, HeaderAnnouncingMoreThanTheFileHoldsIsTruncatedNotAnAllocation) {
  TempDir dir;
  write_file(dir.file("huge"), idx_bytes(0x0803, {0xffffff, 0xffffff, 2}, "a"));
  EXPECT_CONTAINS(message_of<InvalidArgument>([&] { read_idx(dir.file("huge")); }),
                  "huge is truncated: its header says 16777215 x 16777215 x 2 = "
                  "562949886312450 bytes of data, but it holds 1");
  write_file(dir.file("overflow"), idx_bytes(0x0803, {0xffffffff, 0xffffffff, 0xffffffff}, ""));
  EXPECT_CONTAINS(message_of<InvalidArgument>([&] { read_idx(dir.file("overflow")); }),
                  "more than a tensor can hold");
  // The fuzzer's input: labels announcing 4160749316 bytes, then 5.
  write_gz(dir.file("4gb.gz"), idx_bytes(0x0801, {0xf7ffff04},
                                         "\x01"
                                         "a\x03\x04\x05"));
  EXPECT_CONTAINS(message_of<InvalidArgument>([&] { read_idx(dir.file("4gb.gz")); }),
                  "= 4160749316 bytes of data, but it holds 5");
}

TEST(FashionMnistDataset, NormalizesAndChecksCounts) {
  TempDir dir;
  const std::string pixels = ramp(5 * 28 * 28);
  write_gz(dir.file("train-images-idx3-ubyte.gz"), idx_bytes(0x0803, {5, 28, 28}, pixels));
  write_file(dir.file("train-labels-idx1-ubyte"),
             idx_bytes(0x0801, {5}, std::string("\1\2\3\4\5")));
  FashionMnist data({.dir = dir.file(""), .subset = 4});
  ASSERT_EQ(data.size().value(), 4u);
  const auto example = data.get(3);
  EXPECT_EQ(example.data.sizes(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(example.target.item<int64_t>(), 4);
  const double raw = static_cast<unsigned char>(pixels[3 * 784 + 5]);
  EXPECT_NEAR(example.data[0][0][5].item<double>(), (raw / 255 - 0.2860) / 0.3530, 1e-5);
  EXPECT_CONTAINS(message_of<Error>([&] { FashionMnist({.dir = dir.file(""), .subset = 6}); }),
                  "holds only 5");
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes(0x0801, {4}, std::string("\1\2\3\4")));
  EXPECT_CONTAINS(message_of<Error>([&] { FashionMnist({.dir = dir.file("")}); }),
                  "holds 5 images but");
  EXPECT_CONTAINS(
      message_of<Error>([&] { FashionMnist({.dir = dir.file(""), .split = Split::test}); }),
      "apt-get install dataset-fashion-mnist");
}

}  // namespace
}  // namespace lockstep::torch
