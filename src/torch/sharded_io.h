// Sharded checkpoints (lockstep/torch/sharded_checkpoint.h), the parts that need no LibTorch (a
// translation unit that compiles in seconds): the ranks' agreement on the outcome of each step,
// the files checked against the index, and the generation folders.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/group/process_group.h"

namespace lockstep::torch::sharded {

inline constexpr const char* kIndexName = "index";
inline constexpr const char* kGenerationPrefix = "gen-";

// One rank's outcome of a step: kOk, or the kind of lockstep error it failed with, and its text.
enum Kind : int64_t {
  kOk,
  kInvalidArgument,
  kConfigError,
  kMismatchError,
  kTimeout,
  kNetwork,
  kOther
};
struct Outcome {
  int64_t kind = kOk;
  std::string message;
};

// The outcome of `error`: a lockstep error keeps its kind (its subclass), anything else is kOther.
Outcome outcome_of(const std::exception_ptr& error);

// Collective: gathers every rank's outcome of a step (one all_gather, and one more with the texts
// when some rank failed). When some rank failed, every rank throws: this rank its own error when
// it failed, else the first failing rank's, of the same kind, as
// "<what>: rank r failed: <message><after>", naming the other failing ranks.
void agree(ProcessGroup& group, const Outcome& mine, const std::string& what,
           const std::string& after, std::chrono::milliseconds timeout);

// A file of a generation, as the index records it.
struct FileEntry {
  std::string name;  // relative to the checkpoint's folder, e.g. "gen-3/shard-1"
  int64_t size = 0;
  int64_t crc = 0;  // CRC-32 (zlib's)
};

int64_t crc_of(const std::string& bytes);
// The whole file. ConfigError naming the path when it is missing or unreadable.
std::string read_whole(const std::string& path);
// The bytes of `file` in `dir`, checked against its size and CRC-32 (ConfigError otherwise).
std::string read_checked(const std::string& dir, const FileEntry& file);
// fsync of a folder, so that the entries made in it are durable. ConfigError on failure.
void sync_folder(const std::string& folder);

// Creates dir/name (when missing) and makes its entry durable. ConfigError on failure.
void make_folder(const std::string& dir, const std::string& name);

// The generation of a folder named "gen-<G>"; nullopt for any other name.
std::optional<int64_t> generation_of(const std::string& name);
// The highest generation of the gen-* folders in dir (0 when none). ConfigError when dir is not
// a folder.
int64_t highest_generation_folder(const std::string& dir);
// Rank 0's check before the commit: it sees every file, of the size its writer reported.
// files[0] is rank 0's model, files[1 + r] rank r's shard.
void check_visible(const std::string& dir, const std::vector<FileEntry>& files);
// Removes every gen-* folder of dir but `keep` (best effort: errors are left for the next save).
void remove_other_generations(const std::string& dir, const std::string& keep);

// Collective, in a load: every rank's view of the index (whether there is one, its generation,
// its CRC-32) must be the same, else MismatchError on every rank naming each rank's view.
void check_same_index(ProcessGroup& group, const std::array<int64_t, 3>& seen,
                      const std::string& what, std::chrono::milliseconds timeout);

// What each rank passes to a save: the highest generation it sees, its optimizer's parameter
// count (-1: none), whether it has a sampler, and the sampler's cursor (epoch, begin, end,
// dataset size, seed, shuffle).
inline constexpr size_t kPlanSize = 9;
// Collective: gathers every rank's plan and returns the generation to write, past every one any
// rank sees. Throws the same error on every rank when the ranks pass different kinds of state
// (InvalidArgument) or their samplers stand at different places (MismatchError).
int64_t agree_on_plan(ProcessGroup& group, const std::array<int64_t, kPlanSize>& plan,
                      const std::string& what, std::chrono::milliseconds timeout);

}  // namespace lockstep::torch::sharded
