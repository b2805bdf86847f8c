// Sharded checkpoints (include/lockstep/torch/sharded_checkpoint.h): the index and shard files,
// the collective save with its commit, and the load that reshards (one LibTorch translation unit).
#include "lockstep/torch/sharded_checkpoint.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <sstream>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockstep/core/error.h"
#include "torch/checkpoint_bytes.h"
#include "torch/cursor_numbers.h"
#include "torch/sharded_io.h"

namespace lockstep::torch {
namespace {

namespace fs = std::filesystem;
using detail::concat;
using namespace sharded;  // NOLINT(google-build-using-namespace): this file's own helpers
using ::torch::serialize::InputArchive;
using ::torch::serialize::OutputArchive;

constexpr const char* kIndexKey = "lockstep_sharded_checkpoint";
constexpr const char* kShardKey = "lockstep_checkpoint_shard";
constexpr int64_t kFormatVersion = 1;

// Runs one step of a save or load on this rank; its outcome goes to agree().
template <class Step>
Outcome attempt(Step step) {
  try {
    step();
    return {};
  } catch (const c10::Error& e) {  // LibTorch's, from a file it cannot read
    return {kInvalidArgument, e.what_without_backtrace()};
  } catch (...) {
    return outcome_of(std::current_exception());
  }
}

// ---------------------------------------------------------------------------------------------
// Archives

std::string bytes_of(OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

void open_archive(InputArchive& archive, const std::string& bytes, const std::string& path) {
  try {
    archive.load_from(bytes.data(), bytes.size());
  } catch (const std::exception& e) {  // c10::Error, or the TorchScript parser's runtime_error
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    throw InvalidArgument(concat("sharded checkpoint: ", path, " cannot be read as a LibTorch ",
                                 "archive: ", c10 ? c10->what_without_backtrace() : e.what()));
  }
}

[[noreturn]] void missing(const std::string& path, const std::string& key) {
  throw InvalidArgument(concat("sharded checkpoint: ", path, " has no valid \"", key,
                               "\": it is not a file of a lockstep sharded checkpoint"));
}

int64_t get_int(InputArchive& a, const std::string& key, const std::string& path) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isInt()) missing(path, key);
  return v.toInt();
}

std::string get_string(InputArchive& a, const std::string& key, const std::string& path) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isString()) missing(path, key);
  return v.toStringRef();
}

std::vector<int64_t> get_numbers(InputArchive& a, const std::string& key, const std::string& path) {
  at::Tensor t;
  if (!a.try_read(key, t, /*is_buffer=*/true) || t.scalar_type() != at::kLong || t.dim() != 1)
    missing(path, key);
  t = t.contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

std::vector<size_t> get_indices(InputArchive& a, const std::string& key, const std::string& path) {
  const std::vector<int64_t> numbers = get_numbers(a, key, path);
  return {numbers.begin(), numbers.end()};
}

void put(OutputArchive& a, const std::string& key, int64_t value) {
  a.write(key, c10::IValue(value));
}
void put(OutputArchive& a, const std::string& key, const std::string& value) {
  a.write(key, c10::IValue(value));
}
void put_numbers(OutputArchive& a, const std::string& key, const std::vector<int64_t>& numbers) {
  a.write(key, ::torch::tensor(numbers, ::torch::kInt64), /*is_buffer=*/true);
}
void put_indices(OutputArchive& a, const std::string& key, const std::vector<size_t>& indices) {
  put_numbers(a, key, {indices.begin(), indices.end()});
}

SamplerCursor get_cursor(InputArchive& a, const std::string& key, const std::string& path) {
  const std::optional<SamplerCursor> cursor = cursor_from_numbers(get_numbers(a, key, path));
  if (!cursor) missing(path, key);
  return *cursor;
}

std::string describe(const at::Tensor& t) {
  return concat(t.sizes(), " ", t.scalar_type());
}

// Every tensor of the model, "parameter <name>" or "buffer <name>", with its shape and dtype.
std::map<std::string, std::string> model_tensors(const ::torch::nn::Module& model) {
  std::map<std::string, std::string> out;
  for (const auto& item : model.named_parameters())
    out["parameter " + item.key()] = describe(item.value());
  for (const auto& item : model.named_buffers())
    out["buffer " + item.key()] = describe(item.value());
  return out;
}

// ---------------------------------------------------------------------------------------------
// The index

struct Index {
  int64_t generation = 0;
  int64_t world = 0;
  std::vector<FileEntry> files;  // gen-<G>/model, then gen-<G>/shard-<r> for r in [0, W)
  std::map<std::string, int64_t> counters;
  std::map<std::string, std::string> tensors;  // model_tensors of rank 0's model
  bool has_optimizer = false;
  std::vector<std::string> params;          // each optimizer parameter's shape and dtype
  std::vector<std::vector<size_t>> shards;  // old rank s's parameters (global indices)
  std::optional<SamplerCursor> sampler;
};

std::string index_bytes(const Index& index) {
  OutputArchive a;
  put(a, kIndexKey, kFormatVersion);
  put(a, "generation", index.generation);
  put(a, "world_size", index.world);
  for (size_t k = 0; k < index.files.size(); ++k) {
    put(a, concat("file/", k, "/name"), index.files[k].name);
    put(a, concat("file/", k, "/size"), index.files[k].size);
    put(a, concat("file/", k, "/crc32"), index.files[k].crc);
  }
  OutputArchive counters(a.compilation_unit());
  for (const auto& [name, value] : index.counters) counters.write(name, c10::IValue(value));
  a.write("counters", counters);
  put(a, "tensors", static_cast<int64_t>(index.tensors.size()));
  size_t k = 0;
  for (const auto& [name, what] : index.tensors) {
    put(a, concat("tensor/", k, "/name"), name);
    put(a, concat("tensor/", k++, "/is"), what);
  }
  put(a, "optimizer", static_cast<int64_t>(index.has_optimizer));
  put(a, "optimizer/params", static_cast<int64_t>(index.params.size()));
  for (size_t i = 0; i < index.params.size(); ++i)
    put(a, concat("optimizer/param/", i), index.params[i]);
  for (size_t s = 0; s < index.shards.size(); ++s)
    put_indices(a, concat("optimizer/shard/", s), index.shards[s]);
  put(a, "sampler", static_cast<int64_t>(index.sampler.has_value()));
  if (index.sampler) put_numbers(a, "sampler/cursor", cursor_numbers(*index.sampler));
  return bytes_of(a);
}

Index parse_index(const std::string& bytes, const std::string& path) {
  InputArchive a;
  open_archive(a, bytes, path);
  const int64_t version = get_int(a, kIndexKey, path);
  LOCKSTEP_ENFORCE(version == kFormatVersion, InvalidArgument, "sharded checkpoint: ", path,
                   " is of format version ", version, "; this lockstep reads version ",
                   kFormatVersion);
  Index index;
  index.generation = get_int(a, "generation", path);
  index.world = get_int(a, "world_size", path);
  LOCKSTEP_ENFORCE(index.world >= 1, InvalidArgument, "sharded checkpoint: ", path,
                   " records a world size of ", index.world);
  for (int64_t k = 0; k <= index.world; ++k) {
    index.files.push_back({get_string(a, concat("file/", k, "/name"), path),
                           get_int(a, concat("file/", k, "/size"), path),
                           get_int(a, concat("file/", k, "/crc32"), path)});
  }
  InputArchive counters;
  if (!a.try_read("counters", counters)) missing(path, "counters");
  for (const std::string& name : counters.keys()) {
    c10::IValue value;
    counters.read(name, value);
    if (value.isInt()) index.counters[name] = value.toInt();
  }
  for (int64_t k = 0, n = get_int(a, "tensors", path); k < n; ++k) {
    index.tensors[get_string(a, concat("tensor/", k, "/name"), path)] =
        get_string(a, concat("tensor/", k, "/is"), path);
  }
  index.has_optimizer = get_int(a, "optimizer", path) != 0;
  if (index.has_optimizer) {
    const int64_t n = get_int(a, "optimizer/params", path);
    for (int64_t i = 0; i < n; ++i)
      index.params.push_back(get_string(a, concat("optimizer/param/", i), path));
    std::vector<int> seen(index.params.size(), 0);
    for (int64_t s = 0; s < index.world; ++s) {
      index.shards.push_back(get_indices(a, concat("optimizer/shard/", s), path));
      for (size_t i : index.shards.back()) {
        LOCKSTEP_ENFORCE(i < seen.size() && seen[i]++ == 0, InvalidArgument,
                         "sharded checkpoint: ", path,
                         " is damaged: its shards do not partition the parameters");
      }
    }
    LOCKSTEP_ENFORCE(std::count(seen.begin(), seen.end(), 1) == n, InvalidArgument,
                     "sharded checkpoint: ", path, " is damaged: a parameter is in no shard");
  }
  if (get_int(a, "sampler", path) != 0) index.sampler = get_cursor(a, "sampler/cursor", path);
  return index;
}

// The highest generation in dir: of its gen-* folders and of its index.
int64_t highest_generation(const std::string& dir) {
  int64_t highest = highest_generation_folder(dir);
  const std::string index = (fs::path(dir) / kIndexName).string();
  std::error_code ec;
  try {
    if (fs::exists(index, ec))
      highest = std::max(highest, parse_index(read_whole(index), index).generation);
  } catch (const Error&) {
    // A damaged index: the folders decide; the commit replaces it.
  }
  return highest;
}

// ---------------------------------------------------------------------------------------------
// Saving

// Writes file `name` of `dir` atomically; returns its size and CRC-32.
FileEntry write_part(const std::string& dir, const std::string& name, const std::string& bytes,
                     const ShardedCheckpointOptions& options) {
  CheckpointWriteOptions write;
  if (options.after_chunk) write.after_chunk = [&](size_t n) { options.after_chunk(name, n); };
  write_file_atomically((fs::path(dir) / name).string(), bytes, write);
  return {name, static_cast<int64_t>(bytes.size()), crc_of(bytes)};
}

std::string shard_bytes(const ShardedCheckpointState& state, int rank, int world,
                        int64_t generation) {
  OutputArchive a;
  put(a, kShardKey, kFormatVersion);
  put(a, "generation", generation);
  put(a, "rank", int64_t{rank});
  put(a, "world_size", int64_t{world});
  if (state.optimizer != nullptr) {
    put_indices(a, "params", state.optimizer->shard(rank));
    if (state.optimizer->has_local_optimizer()) {
      OutputArchive optimizer(a.compilation_unit());
      state.optimizer->local_optimizer().save(optimizer);
      a.write("optimizer", optimizer);
    }
  }
  if (state.sampler != nullptr) put_numbers(a, "sampler", cursor_numbers(state.sampler->cursor()));
  return bytes_of(a);
}

// This rank's plan of a save (sharded_io.h, kPlanSize).
std::array<int64_t, kPlanSize> plan_of(const ShardedCheckpointState& state,
                                       const std::string& dir) {
  LOCKSTEP_ENFORCE(state.model != nullptr, InvalidArgument, "state.model is null");
  std::array<int64_t, kPlanSize> plan{highest_generation(dir), -1, 0, 0, 0, 0, 0, 0, 0};
  if (state.optimizer != nullptr)
    plan[1] = static_cast<int64_t>(state.optimizer->parameters().size());
  if (state.sampler != nullptr) {
    plan[2] = 1;
    const std::vector<int64_t> cursor = cursor_numbers(state.sampler->cursor());
    std::copy(cursor.begin(), cursor.end(), plan.begin() + 3);
  }
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Loading

// The key of a parameter in Optimizer::state(): the address of its TensorImpl, as a string in
// LibTorch 1.x (c10::guts::to_string of the pointer) and as the pointer itself in 2.x.
using StateMap =
    std::remove_reference_t<decltype(std::declval<::torch::optim::Optimizer&>().state())>;
using StateKey =
    std::remove_cv_t<std::remove_reference_t<decltype(std::declval<StateMap&>().begin()->first)>>;

template <class Key = StateKey>
Key state_key(const at::Tensor& t) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << static_cast<const void*>(t.unsafeGetTensorImpl());
    return out.str();
  } else {
    return static_cast<Key>(t.unsafeGetTensorImpl());
  }
}

void check_fit(const Index& index, const ShardedCheckpointState& state, const std::string& dir) {
  const std::string where =
      concat("the checkpoint in ", dir, " (generation ", index.generation, ") does not fit: ");
  std::map<std::string, std::string> saved = index.tensors;
  for (const auto& [name, what] : model_tensors(*state.model)) {
    const auto it = saved.find(name);
    LOCKSTEP_ENFORCE(it != saved.end(), InvalidArgument, where, "it has no ", name,
                     " (the model's is ", what, "); was it saved from another model?");
    LOCKSTEP_ENFORCE(it->second == what, InvalidArgument, where, name, " is ", it->second,
                     " in the checkpoint but ", what, " in the model");
    saved.erase(it);
  }
  LOCKSTEP_ENFORCE(saved.empty(), InvalidArgument, where, "it holds ", saved.begin()->first, " (",
                   saved.begin()->second, "), which the model lacks");
  if (state.optimizer != nullptr) {
    LOCKSTEP_ENFORCE(index.has_optimizer, InvalidArgument, "the checkpoint in ", dir,
                     " holds no optimizer state; load it without an optimizer");
    const auto& params = state.optimizer->parameters();
    LOCKSTEP_ENFORCE(params.size() == index.params.size(), InvalidArgument, where,
                     "it holds the state of ", index.params.size(),
                     " optimizer parameters, but the optimizer has ", params.size());
    std::unordered_map<const void*, std::string> names;
    for (const auto& item : state.model->named_parameters())
      names[item.value().unsafeGetTensorImpl()] = item.key();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto name = names.find(params[i].unsafeGetTensorImpl());
      LOCKSTEP_ENFORCE(describe(params[i]) == index.params[i], InvalidArgument, where,
                       "optimizer parameter #", i,
                       name == names.end() ? "" : concat(" (", name->second, ")"), " is ",
                       index.params[i], " in the checkpoint but ", describe(params[i]), " here");
    }
  }
  if (state.sampler != nullptr) {
    LOCKSTEP_ENFORCE(index.sampler.has_value(), InvalidArgument, "the checkpoint in ", dir,
                     " holds no sampler cursor (it was saved without a sampler)");
    const SamplerCursor mine = state.sampler->cursor();
    LOCKSTEP_ENFORCE(mine.dataset_size == index.sampler->dataset_size &&
                         mine.seed == index.sampler->seed && mine.shuffle == index.sampler->shuffle,
                     InvalidArgument, where, "its sampler ran over ", index.sampler->dataset_size,
                     " samples with seed ", index.sampler->seed,
                     index.sampler->shuffle ? "" : " unshuffled", ", this one over ",
                     mine.dataset_size, " with seed ", mine.seed,
                     mine.shuffle ? "" : " unshuffled");
  }
}

// [Resharding]: this rank's optimizer takes the saved state of the parameters it now owns.
void reshard(const Index& index, const std::string& dir, int rank, ZeroRedundancyOptimizer& zero) {
  if (!zero.has_local_optimizer()) return;
  ::torch::optim::Optimizer& local = zero.local_optimizer();
  const auto& params = zero.parameters();
  std::vector<char> owned(params.size(), 0);
  for (size_t i : zero.shard(rank)) owned[i] = 1;
  std::unordered_map<const void*, size_t> global;
  for (size_t i = 0; i < params.size(); ++i) global[params[i].unsafeGetTensorImpl()] = i;
  std::vector<size_t> group_first;  // the global index of each local group's first parameter
  for (const auto& group : local.param_groups()) {
    const auto it = group.params().empty() ? global.end()
                                           : global.find(group.params()[0].unsafeGetTensorImpl());
    group_first.push_back(it == global.end() ? params.size() : it->second);
  }
  for (size_t s = 0; s < index.shards.size(); ++s) {
    const std::vector<size_t>& old = index.shards[s];
    if (std::none_of(old.begin(), old.end(), [&](size_t i) { return owned[i] != 0; })) continue;
    const std::string path = (fs::path(dir) / index.files[1 + s].name).string();
    const std::string bytes = read_checked(dir, index.files[1 + s]);
    InputArchive root;
    open_archive(root, bytes, path);
    LOCKSTEP_ENFORCE(get_int(root, "generation", path) == index.generation &&
                         get_int(root, "rank", path) == static_cast<int64_t>(s) &&
                         get_indices(root, "params", path) == old,
                     InvalidArgument, "sharded checkpoint: ", path, " is not rank ", s,
                     "'s shard of generation ", index.generation, " as the index describes it");
    InputArchive saved;
    LOCKSTEP_ENFORCE(root.try_read("optimizer", saved), InvalidArgument,
                     "sharded checkpoint: ", path, " holds no optimizer state");
    std::vector<at::Tensor> stand_ins;
    for (size_t i : old)
      stand_ins.push_back(at::zeros_like(params[i]).requires_grad_(params[i].requires_grad()));
    auto temp = zero.optimizer_factory()(stand_ins);
    LOCKSTEP_ENFORCE(temp != nullptr, InvalidArgument,
                     "the optimizer factory returned no optimizer");
    try {
      temp->load(saved);
    } catch (const c10::Error& e) {
      throw InvalidArgument(concat("sharded checkpoint: the optimizer state in ", path,
                                   " does not load into an optimizer of this job's factory ",
                                   "(another kind of optimizer?): ", e.what_without_backtrace()));
    }
    std::unordered_set<StateKey> keys;
    for (const auto& t : stand_ins) keys.insert(state_key(t));
    for (const auto& item : temp->state()) {
      LOCKSTEP_ENFORCE(keys.count(item.first) != 0, InvalidArgument, "sharded checkpoint: the ",
                       "optimizer keeps state that is not per parameter (LBFGS?); it cannot be ",
                       "resharded");
    }
    for (size_t k = 0; k < old.size(); ++k) {
      if (!owned[old[k]]) continue;
      const auto it = temp->state().find(state_key(stand_ins[k]));
      if (it == temp->state().end()) {
        local.state().erase(state_key(params[old[k]]));
      } else {
        local.state()[state_key(params[old[k]])] = std::move(it->second);
      }
    }
    for (size_t g = 0; g < group_first.size(); ++g) {
      const auto k = std::find(old.begin(), old.end(), group_first[g]) - old.begin();
      if (static_cast<size_t>(k) == old.size()) continue;
      for (const auto& group : temp->param_groups()) {
        for (const auto& p : group.params()) {
          if (p.unsafeGetTensorImpl() == stand_ins[k].unsafeGetTensorImpl())
            local.param_groups()[g].set_options(group.options().clone());
        }
      }
    }
  }
}

}  // namespace

void save_sharded_checkpoint(ProcessGroup& group, const std::string& dir,
                             const ShardedCheckpointState& state,
                             const ShardedCheckpointOptions& options) {
  const std::string what = concat("save_sharded_checkpoint(", dir, ")");
  const int rank = group.rank();
  const auto world = static_cast<size_t>(group.size());
  // 1. The generation to write (past every one in the folder), and what every rank passes.
  std::array<int64_t, kPlanSize> plan{};
  agree(group, attempt([&] { plan = plan_of(state, dir); }), what, "", options.timeout);
  const int64_t generation = agree_on_plan(group, plan, what, options.timeout);
  const std::string folder = concat(kGenerationPrefix, generation);
  // 2. Every rank writes its shard, rank 0 the model too: durable before the all_gather below.
  std::array<int64_t, 4> written{};  // the shard's size and CRC-32, then the model's (rank 0)
  const Outcome wrote = attempt([&] {
    make_folder(dir, folder);
    const FileEntry shard = write_part(dir, concat(folder, "/shard-", rank),
                                       shard_bytes(state, rank, group.size(), generation), options);
    written = {shard.size, shard.crc, 0, 0};
    if (rank == 0) {
      const FileEntry model =
          write_part(dir, folder + "/model",
                     checkpoint_bytes(
                         {.model = state.model, .optimizer = nullptr, .counters = state.counters}),
                     options);
      written[2] = model.size;
      written[3] = model.crc;
    }
  });
  agree(group, wrote, concat(what, ", generation ", generation),
        "; nothing was committed: the previous checkpoint stays in force", options.timeout);
  std::vector<int64_t> all(4 * world);
  group
      .all_gather(ConstBufferView(written.data(), 4, DType::i64), view(all),
                  {.timeout = options.timeout})
      ->wait();
  // 3. Rank 0 commits the index ([Atomicity] 2), then removes the other generations (3).
  const Outcome committed = attempt([&] {
    if (rank != 0) return;
    Index index;
    index.generation = generation;
    index.world = static_cast<int64_t>(world);
    index.files.push_back({folder + "/model", all[2], all[3]});
    for (size_t r = 0; r < world; ++r)
      index.files.push_back({concat(folder, "/shard-", r), all[4 * r], all[4 * r + 1]});
    index.counters = state.counters;
    index.tensors = model_tensors(*state.model);
    if (state.optimizer != nullptr) {
      index.has_optimizer = true;
      for (const auto& p : state.optimizer->parameters()) index.params.push_back(describe(p));
      for (size_t r = 0; r < world; ++r)
        index.shards.push_back(state.optimizer->shard(static_cast<int>(r)));
    }
    if (state.sampler != nullptr) index.sampler = state.sampler->cursor();
    check_visible(dir, index.files);
    write_part(dir, kIndexName, index_bytes(index), options);
    remove_other_generations(dir, folder);
  });
  agree(group, committed, concat(what, ", generation ", generation), "", options.timeout);
}

bool load_sharded_checkpoint(ProcessGroup& group, const std::string& dir,
                             ShardedCheckpointState* state,
                             const ShardedCheckpointOptions& options) {
  const std::string what = concat("load_sharded_checkpoint(", dir, ")");
  // 1. The index, which every rank reads itself; they must all see the same one.
  std::optional<Index> index;
  std::array<int64_t, 3> seen{0, 0, 0};  // whether there is one, its generation, its CRC-32
  agree(group, attempt([&] {
          LOCKSTEP_ENFORCE(state != nullptr && state->model != nullptr, InvalidArgument,
                           "state and state->model must be set");
          const std::string path = (fs::path(dir) / kIndexName).string();
          std::error_code ec;
          if (!fs::exists(path, ec)) return;
          const std::string bytes = read_whole(path);
          index = parse_index(bytes, path);
          seen = {1, index->generation, crc_of(bytes)};
        }),
        what, "", options.timeout);
  check_same_index(group, seen, what, options.timeout);
  if (!index) return false;
  // 2. Whether it fits, before anything is loaded.
  agree(group, attempt([&] { check_fit(*index, *state, dir); }), what, "", options.timeout);
  // 3. The model and counters, the optimizer state resharded, the sampler's place.
  agree(group, attempt([&] {
          const std::string bytes = read_checked(dir, index->files[0]);
          CheckpointState model{.model = state->model, .optimizer = nullptr, .counters = {}};
          read_checkpoint_bytes(bytes.data(), bytes.size(),
                                (fs::path(dir) / index->files[0].name).string(), &model);
          if (state->optimizer != nullptr) reshard(*index, dir, group.rank(), *state->optimizer);
          if (state->sampler != nullptr) state->sampler->resume(*index->sampler);
          state->counters = index->counters;
        }),
        what, "", options.timeout);
  return true;
}

}  // namespace lockstep::torch
