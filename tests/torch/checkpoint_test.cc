// Checkpoints (round trip, rejection, a save killed midway, collective save and load) and the
// main job's training run, launched for real (accuracy, equivalence with one process, resume).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
using lockstep::testing::spawn_groups;
using lockstep::testing::TempDir;
using lockstep::testing::write_file;

// ---------------------------------------------------------------------------------------------
// Checkpoints

::torch::nn::Sequential small_model(int64_t hidden = 8) {
  return ::torch::nn::Sequential(::torch::nn::Linear(4, hidden), ::torch::nn::BatchNorm1d(hidden),
                                 ::torch::nn::ReLU(), ::torch::nn::Linear(hidden, 2));
}

void sgd_step(::torch::nn::Sequential& model, ::torch::optim::SGD& optimizer, int seed) {
  ::torch::manual_seed(seed);
  optimizer.zero_grad();
  model->forward(::torch::randn({16, 4})).pow(2).mean().backward();
  optimizer.step();
}

bool same_tensors(::torch::nn::Module& a, ::torch::nn::Module& b) {
  const auto ta = a.named_parameters(), tb = b.named_parameters();
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  for (const auto& item : ta)
    if (!item.value().equal(tb[item.key()])) return false;
  for (const auto& item : ba)
    if (!item.value().equal(bb[item.key()])) return false;
  return ta.size() == tb.size() && ba.size() == bb.size();
}

TEST(Checkpoint, RoundTripRestoresModelOptimizerAndCounters) {
  TempDir dir;
  auto a = small_model();
  ::torch::optim::SGD opt_a(a->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  sgd_step(a, opt_a, 1);  // momentum buffers and BatchNorm statistics are now non-trivial
  write_checkpoint(
      dir.file("ck"),
      {.model = a.ptr().get(), .optimizer = &opt_a, .counters = {{"epoch", 3}, {"step", 120}}});
  auto b = small_model();
  ::torch::optim::SGD opt_b(b->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ASSERT_FALSE(same_tensors(*a, *b));
  CheckpointState state{.model = b.ptr().get(), .optimizer = &opt_b};
  read_checkpoint(dir.file("ck"), &state);
  EXPECT_TRUE(same_tensors(*a, *b));
  EXPECT_EQ(state.counters, (std::map<std::string, int64_t>{{"epoch", 3}, {"step", 120}}));
  sgd_step(a, opt_a, 2);  // equal next steps need the momentum buffers restored too
  sgd_step(b, opt_b, 2);
  EXPECT_TRUE(same_tensors(*a, *b));
  EXPECT_FALSE(fs::exists(dir.file("ck.tmp." + std::to_string(::getpid()))));
}

TEST(Checkpoint, RejectsOtherModelsAndOtherFiles) {
  TempDir dir;
  auto a = small_model(8);
  write_checkpoint(dir.file("ck"), {.model = a.ptr().get()});
  auto wider = small_model(16);
  CheckpointState state{.model = wider.ptr().get()};
  const std::string text = message_of<Error>([&] { read_checkpoint(dir.file("ck"), &state); });
  EXPECT_CONTAINS(text,
                  "does not fit the model: 0.weight is [8, 4] Float in the file but [16, 4] Float");
  write_file(dir.file("junk"), "not a checkpoint");
  EXPECT_CONTAINS(message_of<Error>([&] { read_checkpoint(dir.file("junk"), &state); }),
                  dir.file("junk") + " cannot be read as a LibTorch archive");
  EXPECT_CONTAINS(message_of<Error>([&] { read_checkpoint(dir.file("none"), &state); }),
                  "does not exist");
  EXPECT_CONTAINS(message_of<Error>([&] {
                    write_checkpoint(dir.file("no/such/dir/ck"), {.model = a.ptr().get()});
                  }),
                  "cannot create " + dir.file("no/such/dir/ck"));
}

// The model of fuzz/corpus/checkpoint: a Linear(4, 2) and a buffer.
struct StepsNet : ::torch::nn::Module {
  StepsNet() {
    fc = register_module("fc", ::torch::nn::Linear(4, 2));
    steps = register_buffer("steps", ::torch::zeros({1}));
  }
  ::torch::nn::Linear fc{nullptr};
  ::torch::Tensor steps;
};

// Found by fuzz/checkpoint_fuzz.cc: five bytes changed in the TorchScript text that a LibTorch
// archive carries made LibTorch's parser throw std::runtime_error ("invalid indent level"), which
// read_checkpoint, catching only c10::Error, let through instead of an InvalidArgument.
TEST(Checkpoint, MangledTorchScriptInTheArchiveIsAnInvalidArgument) {
  TempDir dir;
  StepsNet net;
  write_checkpoint(dir.file("ck"), {.model = &net});
  std::string bytes = lockstep::testing::read_file(dir.file("ck"));
  const std::string text = "steps : Tensor\n  fc :";
  const size_t at = bytes.find(text);
  ASSERT_NE(at, std::string::npos) << "LibTorch's archive layout changed";
  bytes.replace(at, text.size(), "steps : Tensocrf  \n :");  // the fuzzer's bytes, same length
  write_file(dir.file("mangled"), bytes);
  CheckpointState state{.model = &net};
  EXPECT_CONTAINS(
      message_of<InvalidArgument>([&] { read_checkpoint(dir.file("mangled"), &state); }),
      dir.file("mangled") + " cannot be read as a LibTorch archive: invalid indent level");
}

// A child process starts saving a second checkpoint over the first and is killed by SIGKILL
// halfway through writing it. The first checkpoint must still load, whole.
TEST(Checkpoint, SaveKilledMidwayLeavesThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("ck");
  ::torch::nn::Linear old_model(1000, 1000);  // 4 MB: the write takes several chunks
  write_checkpoint(path, {.model = old_model.ptr().get(), .counters = {{"epoch", 1}}});
  const auto old_size = fs::file_size(path);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::torch::nn::Linear new_model(1000, 1000);
    write_checkpoint(path, {.model = new_model.ptr().get(), .counters = {{"epoch", 2}}},
                     {.after_chunk = [&](size_t written) {
                       if (written * 2 >= old_size) ::raise(SIGKILL);
                     }});
    ::_exit(0);  // not reached when the kill lands mid-write
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const std::string partial = path + ".tmp." + std::to_string(child);
  ASSERT_TRUE(fs::exists(partial)) << "the crash happened while writing the temporary file";
  EXPECT_GT(fs::file_size(partial), 0u);
  EXPECT_LT(fs::file_size(partial), old_size);
  ::torch::nn::Linear loaded(1000, 1000);
  CheckpointState state{.model = loaded.ptr().get()};
  read_checkpoint(path, &state);
  EXPECT_EQ(state.counters.at("epoch"), 1);
  EXPECT_TRUE(loaded->weight.equal(old_model->weight));
  write_checkpoint(path, {.model = old_model.ptr().get(), .counters = {{"epoch", 3}}});
  EXPECT_FALSE(fs::exists(partial)) << "the next save removes the dead process's leftover";
}

// Sets every parameter and buffer of `model` to values that depend on `seed` alone (ranks as
// threads share LibTorch's random generator, so manual_seed cannot tell them apart).
void fill_distinctly(::torch::nn::Module& model, int seed) {
  ::torch::NoGradGuard no_grad;
  double offset = 0;
  for (auto& t : model.parameters()) {
    t.copy_(::torch::arange(t.numel(), ::torch::kFloat).reshape(t.sizes()) * 0.01 + seed + offset);
    offset += 0.5;
  }
  for (auto& t : model.buffers())
    if (t.is_floating_point()) t.fill_(seed + 0.25);
}

// A checkpoint saved 2 batches into an epoch resumes the loader's sampler there: the loader's next
// pass yields the rest of that epoch's shard, then the next epoch whole. A checkpoint saved
// without a sampler cannot resume one.
TEST(Checkpoint, SamplerMidEpochResumesTheLoadersRestOfTheEpoch) {
  TempDir dir;
  constexpr size_t kSamples = 40, kBatch = 3;
  spawn_groups(2, [&](ProcessGroup& pg) {
    using Data = ::torch::data::datasets::TensorDataset;
    auto make_loader = [&] {
      return DistributedDataLoader<Data>(
          Data(::torch::arange(static_cast<int64_t>(kSamples))), pg,
          {.batch_size = kBatch, .sampler = {.seed = 5, .first_epoch = 2}});
    };
    auto model = small_model();
    const std::string file = dir.file("ck" + std::to_string(pg.rank()));
    auto loader = make_loader();
    std::vector<int64_t> uninterrupted;
    size_t batches = 0;
    for (auto& batch : loader) {
      for (const auto& e : batch) uninterrupted.push_back(e.data.item<int64_t>());
      if (++batches == 2) {
        write_checkpoint(file, {.model = model.ptr().get(), .sampler = &loader.sampler()});
      }
    }
    auto resumed = make_loader();
    CheckpointState state{.model = model.ptr().get(), .sampler = &resumed.sampler()};
    read_checkpoint(file, &state);
    std::vector<int64_t> rest;
    for (auto& batch : resumed)
      for (const auto& e : batch) rest.push_back(e.data.item<int64_t>());
    EXPECT_EQ(resumed.epoch(), 2);
    EXPECT_EQ(rest, std::vector<int64_t>(uninterrupted.begin() + 2 * kBatch, uninterrupted.end()));
    size_t next_epoch = 0;
    for (auto& batch : resumed) next_epoch += batch.size();
    EXPECT_EQ(resumed.epoch(), 3);
    EXPECT_EQ(next_epoch, kSamples / 2) << "the epoch after the resumed one is whole";

    write_checkpoint(file, {.model = model.ptr().get()});
    try {
      read_checkpoint(file, &state);
      ADD_FAILURE() << "a checkpoint without a cursor resumed a sampler";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "holds no sampler cursor")) << e.what();
    }
  });
}

TEST(Checkpoint, CollectiveSaveAndLoad) {
  TempDir dir;
  // Rank 0's model as saved, for every rank to compare its reloaded model with.
  auto rank0_saved = small_model();
  fill_distinctly(*rank0_saved, 0);
  spawn_groups(2, [&](ProcessGroup& pg) {
    auto model = small_model();
    fill_distinctly(*model, pg.rank());  // the ranks start different
    EXPECT_EQ(same_tensors(*model, *rank0_saved), pg.rank() == 0);
    CheckpointState state{.model = model.ptr().get()};
    EXPECT_FALSE(load_checkpoint(pg, dir.file("ck"), &state)) << "no rank has a file yet";
    state.counters = {{"epoch", 7}};
    save_checkpoint(pg, dir.file("ck"), state);  // rank 0's weights
    auto reloaded = small_model();
    fill_distinctly(*reloaded, 10 + pg.rank());  // neither rank's: loading must overwrite it all
    CheckpointState loaded{.model = reloaded.ptr().get()};
    EXPECT_TRUE(load_checkpoint(pg, dir.file("ck"), &loaded));
    EXPECT_EQ(loaded.counters.at("epoch"), 7);
    // Every rank now holds rank 0's parameters and buffers, element by element.
    const auto got = reloaded->named_parameters(), want = rank0_saved->named_parameters();
    ASSERT_EQ(got.size(), want.size());
    for (const auto& item : want) {
      const at::Tensor& g = got[item.key()];
      ASSERT_EQ(g.sizes(), item.value().sizes()) << item.key();
      const auto* a = g.data_ptr<float>();
      const auto* b = item.value().data_ptr<float>();
      for (int64_t i = 0; i < g.numel(); ++i)
        ASSERT_EQ(a[i], b[i]) << item.key() << "[" << i << "] on rank " << pg.rank();
    }
    EXPECT_TRUE(same_tensors(*reloaded, *rank0_saved)) << "buffers too, on rank " << pg.rank();
    const std::string other = pg.rank() == 1 ? dir.file("elsewhere") : dir.file("ck");
    const std::string text = message_of<Error>([&] { load_checkpoint(pg, other, &loaded); });
    EXPECT_CONTAINS(text, "see different checkpoints (rank 0: loaded");
    EXPECT_CONTAINS(text, "rank 1: no file");
  });
}

// ---------------------------------------------------------------------------------------------
// Training: the main job, launched for real

bool have_fashion_mnist() {
  return fs::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

std::string train_binary() {
  return (fs::path(LOCKSTEP_CLI_PATH).parent_path() / "train_fashion_mnist").string();
}

// `lockstep run --nproc-per-node 2 -- train_fashion_mnist ARGS...`
std::vector<std::string> launch_training(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      LOCKSTEP_CLI_PATH, "run", "--standalone", "--nproc-per-node", "2", "--", train_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The "epoch E/N: train loss L, test accuracy A%" part of an epoch's summary line.
std::string epoch_summary(const std::string& output, int epoch, int epochs) {
  std::smatch match;
  const std::regex line("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs) +
                        R"(: train loss [0-9.]+, test accuracy [0-9.]+%)");
  return std::regex_search(output, match, line) ? match.str() : "(epoch line missing)";
}

// The main job's model (examples/train_fashion_mnist), with the same names and shapes, to read the
// parameters of its checkpoints.
struct FashionNetImpl : ::torch::nn::Module {
  FashionNetImpl()
      : conv1(register_module("conv1", ::torch::nn::Conv2d(::torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", ::torch::nn::Conv2d(::torch::nn::Conv2dOptions(32, 64, 3)))),
        fc1(register_module("fc1", ::torch::nn::Linear(64 * 5 * 5, 128))),
        fc2(register_module("fc2", ::torch::nn::Linear(128, 10))) {}
  ::torch::nn::Conv2d conv1, conv2;
  ::torch::nn::Linear fc1, fc2;
};

// The parameters in the main job's checkpoint at `path`.
std::map<std::string, at::Tensor> checkpoint_parameters(const std::string& path) {
  auto net = std::make_shared<FashionNetImpl>();
  CheckpointState state{.model = net.get()};
  read_checkpoint(path, &state);
  std::map<std::string, at::Tensor> out;
  for (const auto& item : net->named_parameters()) out[item.key()] = item.value().detach().clone();
  return out;
}

// Runs one training step of the main job and returns its checkpoint's parameters: on 2 ranks
// under `lockstep run` with `batch` samples each, or alone (no launcher) with `batch` samples.
std::map<std::string, at::Tensor> one_step(const TempDir& dir, const std::string& name,
                                           bool two_ranks, int batch) {
  const std::vector<std::string> args = {
      "--subset",         "6000",        "--epochs",     "1",
      "--max-steps",      "1",           "--batch-size", std::to_string(batch),
      "--checkpoint-dir", dir.file(name)};
  std::vector<std::string> argv = {train_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = lockstep::testing::run_process(two_ranks ? launch_training(args) : argv,
                                                     {{"RANK", std::nullopt},
                                                      {"WORLD_SIZE", std::nullopt},
                                                      {"MASTER_ADDR", std::nullopt},
                                                      {"MASTER_PORT", std::nullopt},
                                                      {"SLURM_NTASKS", std::nullopt},
                                                      {"OMPI_COMM_WORLD_SIZE", std::nullopt}},
                                                     std::chrono::seconds(180));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, two_ranks ? "2 rank(s)" : "1 rank(s)")) << result.output;
  return checkpoint_parameters(dir.file(name + "/fashion_mnist.ckpt"));
}

TEST(Training, OneEpochOnSubsetReaches75PercentWithWorld2) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  const std::string binary = train_binary();
  ASSERT_TRUE(fs::exists(binary)) << binary << " is missing: build the train_fashion_mnist target";
  TempDir dir;
  const auto result = lockstep::testing::run_process(
      // Batch 16 per rank: one epoch of 3000 samples per rank is then 188 steps (measured 81.5% and
      // 81.1% with seeds 0 and 1). With the default 64 there are only 47 steps: about 75%, too
      // close.
      {LOCKSTEP_CLI_PATH, "run", "--standalone", "--nproc-per-node", "2", "--", binary, "--subset",
       "6000", "--epochs", "1", "--batch-size", "16", "--checkpoint-dir", dir.file("ck")},
      {}, std::chrono::seconds(240));
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(result.output, match, std::regex(R"(test accuracy ([0-9.]+)%)")))
      << result.output;
  EXPECT_GT(std::stod(match[1]), 75.0) << result.output;
  EXPECT_TRUE(fs::exists(dir.file("ck/fashion_mnist.ckpt"))) << "a checkpoint per epoch";

  // The accuracy above would come as well from ranks that each train their own replica: the ranks
  // must average their gradients. One step on 2 ranks with 16 samples each must give the weights
  // of one step of a single process on both ranks' samples together (32: the sampler deals the
  // same shuffled indices alternately to the 2 ranks, so its first 32 are the ranks' first
  // batches). Without averaging, rank 0 (whose weights the checkpoint holds) would have stepped on
  // its own 16 samples only: about 1e-2 away (measured), where the summation order makes 3e-8.
  const auto ddp = one_step(dir, "ddp", true, 16);
  const auto alone = one_step(dir, "alone", false, 32);
  ASSERT_EQ(ddp.size(), alone.size());
  double worst = 0;
  for (const auto& [name, value] : alone) {
    ASSERT_TRUE(ddp.count(name)) << name;
    worst = std::max(worst, (ddp.at(name) - value).abs().max().item<double>());
  }
  std::printf("[training] one DDP step against one step on the union: max difference %.3g\n",
              worst);
  EXPECT_LT(worst, 1e-5) << "one step on 2 ranks is not one step on their samples together";
}

// The main job's --zero 2 (sharded optimizer state and gradients, sharded checkpoints) and
// --uneven (shares of weight 1 and 2, under a Join) reach the default run's accuracy on the subset
// (81.5% there, measured), and a --zero 2 job resumes from its sharded checkpoint.
TEST(Training, ZeroTwoAndUnevenSharesReachTheDefaultAccuracy) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  const std::string binary = train_binary();
  TempDir dir;
  auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = {LOCKSTEP_CLI_PATH,
                                     "run",
                                     "--standalone",
                                     "--nproc-per-node",
                                     "2",
                                     "--",
                                     binary,
                                     "--subset",
                                     "6000",
                                     "--batch-size",
                                     "16",
                                     "--checkpoint-dir",
                                     dir.file("ck")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto result = lockstep::testing::run_process(argv, {}, std::chrono::seconds(240));
    EXPECT_FALSE(result.timed_out) << result.output;
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output;
  };
  auto accuracy = [](const std::string& output) {
    std::smatch match;
    std::string last;
    for (auto it = output.cbegin();
         std::regex_search(it, output.cend(), match, std::regex(R"(test accuracy ([0-9.]+)%)"));
         it = match.suffix().first) {
      last = match[1];
    }
    return last.empty() ? 0.0 : std::stod(last);
  };
  const std::string zero2 = run({"--epochs", "1", "--zero", "2"});
  EXPECT_TRUE(contains(zero2, "ZeRO-2")) << zero2;
  EXPECT_GT(accuracy(zero2), 75.0) << zero2;
  const std::string resumed = run({"--epochs", "2", "--zero", "2", "--resume"});
  EXPECT_TRUE(contains(resumed, "resumed from")) << resumed;
  EXPECT_TRUE(contains(resumed, "epoch 2/2:")) << resumed;
  EXPECT_FALSE(contains(resumed, "epoch 1/2:")) << resumed;  // not trained again
  const std::string uneven = run({"--epochs", "1", "--uneven", "--checkpoint-dir", dir.file("u")});
  EXPECT_TRUE(contains(uneven, "uneven shares")) << uneven;
  EXPECT_GT(accuracy(uneven), 75.0) << uneven;
}

// A job killed after its first epoch's checkpoint and resumed with --resume ends exactly like the
// same job run without interruption: same model, momentum, learning-rate schedule and shuffle.
TEST(Training, ResumeAfterAKillReproducesTheUninterruptedRun) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  ASSERT_TRUE(fs::exists(train_binary())) << "build the train_fashion_mnist target";
  TempDir dir;
  const std::vector<std::string> args = {"--subset", "3000", "--epochs", "2", "--batch-size", "16"};
  auto with_dir = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> all = args;
    all.insert(all.end(), {"--checkpoint-dir", dir.file(name)});
    all.insert(all.end(), extra.begin(), extra.end());
    return launch_training(all);
  };
  const auto whole =
      lockstep::testing::run_process(with_dir("whole", {}), {}, std::chrono::seconds(180));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  lockstep::testing::Child interrupted(with_dir("cut", {}));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(dir.file("cut/fashion_mnist.ckpt")) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  interrupted.kill(SIGTERM);  // during epoch 2 (training it takes seconds)
  interrupted.wait(std::chrono::seconds(60));
  const auto resumed =
      lockstep::testing::run_process(with_dir("cut", {"--resume"}), {}, std::chrono::seconds(180));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_TRUE(contains(resumed.output, "after epoch 1/2")) << "the kill landed during epoch 2\n"
                                                           << resumed.output;
  EXPECT_EQ(epoch_summary(resumed.output, 2, 2), epoch_summary(whole.output, 2, 2))
      << whole.output << "\n---\n"
      << resumed.output;
}

}  // namespace
}  // namespace lockstep::torch
