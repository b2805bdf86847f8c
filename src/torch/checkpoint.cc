// Checkpoints: atomic write (temporary file, fsync, rename, folder fsync), strict read, and the
// collective save/load on top (one LibTorch translation unit).
#include "lockstep/torch/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <vector>

#include "lockstep/core/error.h"
#include "torch/checkpoint_bytes.h"
#include "torch/cursor_numbers.h"

namespace lockstep::torch {
namespace {

namespace fs = std::filesystem;
using detail::concat;

constexpr const char* kFormatKey = "lockstep_checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr size_t kChunkBytes = 1 << 20;

std::string errno_text() {
  return concat(std::strerror(errno), " (errno ", errno, ")");
}

std::string serialize(const CheckpointState& state) {
  ::torch::serialize::OutputArchive root;
  root.write(kFormatKey, c10::IValue(kFormatVersion));
  ::torch::serialize::OutputArchive model(root.compilation_unit());
  state.model->save(model);
  root.write("model", model);
  if (state.optimizer != nullptr) {
    ::torch::serialize::OutputArchive optimizer(root.compilation_unit());
    state.optimizer->save(optimizer);
    root.write("optimizer", optimizer);
  }
  ::torch::serialize::OutputArchive counters(root.compilation_unit());
  for (const auto& [name, value] : state.counters) counters.write(name, c10::IValue(value));
  root.write("counters", counters);
  if (state.sampler != nullptr) {
    ::torch::serialize::OutputArchive sampler(root.compilation_unit());
    sampler.write("cursor",
                  ::torch::tensor(cursor_numbers(state.sampler->cursor()), ::torch::kInt64),
                  /*is_buffer=*/true);
    root.write("sampler", sampler);
  }
  std::string bytes;
  root.save_to([&](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

// Writes all of `bytes` to fd in chunks, calling the fault-injection seam after each.
void write_all(int fd, const std::string& bytes, const std::string& tmp,
               const CheckpointWriteOptions& options) {
  size_t done = 0;
  while (done < bytes.size()) {
    const size_t chunk = std::min(kChunkBytes, bytes.size() - done);
    const ssize_t n = ::write(fd, bytes.data() + done, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw ConfigError(concat("checkpoint: writing ", tmp, " failed: ", errno_text()));
    done += static_cast<size_t>(n);
    if (options.after_chunk) options.after_chunk(done);
  }
}

void fsync_folder(const fs::path& folder, const std::string& path) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = errno_text();
    if (fd >= 0) ::close(fd);
    throw ConfigError(concat("checkpoint: ", path, " was renamed into place, but syncing folder ",
                             folder.string(), " failed: ", why));
  }
  ::close(fd);
}

// Removes "<name>.tmp.<pid>" files left by saves whose process died (see [Atomic write]).
void remove_stale_temporaries(const fs::path& target) {
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

fs::path folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void check_shape(const std::string& path, const std::string& name, const ::torch::Tensor& want,
                 const ::torch::Tensor& got) {
  if (want.sizes() == got.sizes() && want.scalar_type() == got.scalar_type()) return;
  throw InvalidArgument(concat("checkpoint ", path, " does not fit the model: ", name, " is ",
                               got.sizes(), " ", got.scalar_type(), " in the file but ",
                               want.sizes(), " ", want.scalar_type(),
                               " in the model; was it saved from another model?"));
}

// Copies the archive's tensors into the module's own tensors (keeping their identity, so
// optimizer state and DDP hooks stay attached), checking names and shapes first.
void load_module(::torch::nn::Module& module, ::torch::serialize::InputArchive& archive,
                 const std::string& path, const std::string& prefix) {
  ::torch::NoGradGuard no_grad;
  for (const bool buffers : {false, true}) {
    const auto tensors = buffers ? module.named_buffers(/*recurse=*/false)
                                 : module.named_parameters(/*recurse=*/false);
    for (const auto& item : tensors) {
      const std::string name = prefix + item.key();
      ::torch::Tensor stored;
      if (!archive.try_read(item.key(), stored, /*is_buffer=*/buffers)) {
        throw InvalidArgument(concat("checkpoint ", path, " does not fit the model: it has no ",
                                     buffers ? "buffer " : "parameter ", name));
      }
      check_shape(path, name, item.value(), stored);
      item.value().copy_(stored);
    }
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    ::torch::serialize::InputArchive nested;
    if (!archive.try_read(child.key(), nested)) {
      throw InvalidArgument(concat(
          "checkpoint ", path, " does not fit the model: it has no module ", prefix + child.key()));
    }
    load_module(*child.value(), nested, path, prefix + child.key() + ".");
  }
}

void check_state(const std::string& path, const CheckpointState* state) {
  LOCKSTEP_ENFORCE(state != nullptr && state->model != nullptr, InvalidArgument, "read_checkpoint(",
                   path, "): state and state->model must be set");
}

// Runs `step`, a LibTorch call on the archive of `path`, turning what LibTorch throws (c10::Error,
// and the std::runtime_error of its TorchScript parser for a mangled archive) into an
// InvalidArgument that says `what` went wrong with the file.
template <class Step>
void as_invalid_argument(const std::string& path, const char* what, Step step) {
  try {
    step();
  } catch (const Error&) {
    throw;  // lockstep's own, already clear
  } catch (const c10::Error& e) {
    throw InvalidArgument(concat("checkpoint ", path, " ", what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw InvalidArgument(concat("checkpoint ", path, " ", what, ": ", e.what()));
  }
}

// Reads the lockstep checkpoint in the opened archive `root`.
void read_archive(::torch::serialize::InputArchive& root, const std::string& path,
                  CheckpointState* state) {
  c10::IValue version;
  if (!root.try_read(kFormatKey, version) || !version.isInt()) {
    throw InvalidArgument(concat("checkpoint ", path, " is a LibTorch archive but not a lockstep ",
                                 "checkpoint (no \"", kFormatKey, "\" entry)"));
  }
  ::torch::serialize::InputArchive model;
  root.read("model", model);
  load_module(*state->model, model, path, "");
  if (state->optimizer != nullptr) {
    ::torch::serialize::InputArchive optimizer;
    if (!root.try_read("optimizer", optimizer)) {
      throw InvalidArgument(concat("checkpoint ", path, " holds no optimizer state"));
    }
    state->optimizer->load(optimizer);
  }
  ::torch::serialize::InputArchive counters;
  root.read("counters", counters);
  state->counters.clear();
  for (const std::string& name : counters.keys()) {
    c10::IValue value;
    counters.read(name, value);
    if (value.isInt()) state->counters[name] = value.toInt();
  }
  if (state->sampler != nullptr) {
    ::torch::serialize::InputArchive sampler;
    ::torch::Tensor numbers;
    if (!root.try_read("sampler", sampler) ||
        !sampler.try_read("cursor", numbers, /*is_buffer=*/true) ||
        numbers.scalar_type() != ::torch::kInt64 || numbers.dim() != 1) {
      throw InvalidArgument(concat("checkpoint ", path, " holds no sampler cursor (it was saved ",
                                   "without a sampler)"));
    }
    const ::torch::Tensor flat = numbers.contiguous();
    const int64_t* data = flat.data_ptr<int64_t>();
    const std::optional<SamplerCursor> cursor = cursor_from_numbers({data, data + numbers.numel()});
    if (!cursor) throw InvalidArgument(concat("checkpoint ", path, "'s sampler cursor is damaged"));
    state->sampler->resume(*cursor);
  }
}

}  // namespace

void write_checkpoint(const std::string& path, const CheckpointState& state,
                      const CheckpointWriteOptions& options) {
  LOCKSTEP_ENFORCE(state.model != nullptr, InvalidArgument, "write_checkpoint(", path,
                   "): state.model is null");
  write_file_atomically(path, serialize(state), options);
}

std::string checkpoint_bytes(const CheckpointState& state) {
  LOCKSTEP_ENFORCE(state.model != nullptr, InvalidArgument, "checkpoint: state.model is null");
  return serialize(state);
}

void write_file_atomically(const std::string& path, const std::string& bytes,
                           const CheckpointWriteOptions& options) {
  const std::string tmp = concat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw ConfigError(concat("checkpoint: cannot create ", tmp, " next to ", path, ": ",
                             errno_text(), "; does the folder exist and is it writable?"));
  }
  try {
    write_all(fd, bytes, tmp, options);
    if (::fsync(fd) != 0)
      throw ConfigError(concat("checkpoint: fsync of ", tmp, ": ", errno_text()));
    if (::close(fd) != 0)
      throw ConfigError(concat("checkpoint: close of ", tmp, ": ", errno_text()));
  } catch (...) {
    ::close(fd);  // harmless when already closed: the error above is what counts
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw ConfigError(concat("checkpoint: renaming ", tmp, " to ", path, " failed: ", why));
  }
  fsync_folder(folder_of(path), path);
  remove_stale_temporaries(fs::path(path));
}

void read_checkpoint(const std::string& path, CheckpointState* state) {
  check_state(path, state);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw ConfigError(concat("checkpoint ", path, " does not exist or is not a regular file"));
  }
  ::torch::serialize::InputArchive root;
  as_invalid_argument(path, "cannot be read as a LibTorch archive", [&] { root.load_from(path); });
  as_invalid_argument(path, "cannot be read", [&] { read_archive(root, path, state); });
}

void read_checkpoint_bytes(const char* data, size_t size, const std::string& origin,
                           CheckpointState* state) {
  check_state(origin, state);
  ::torch::serialize::InputArchive root;
  as_invalid_argument(origin, "cannot be read as a LibTorch archive",
                      [&] { root.load_from(data, size); });
  as_invalid_argument(origin, "cannot be read", [&] { read_archive(root, origin, state); });
}

// ---------------------------------------------------------------------------------------------
// Collective save and load

void save_checkpoint(ProcessGroup& group, const std::string& path, const CheckpointState& state,
                     const CheckpointOptions& options) {
  if (group.rank() == options.root) write_checkpoint(path, state);
  group.barrier({.timeout = options.timeout})->wait();
}

namespace {

// One rank's outcome of reading a checkpoint, as gathered by load_checkpoint.
enum LoadOutcome : int64_t { kMissing = 0, kLoaded = 1, kFailed = 2 };

int64_t counters_digest(const std::map<std::string, int64_t>& counters) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over names and values
  auto mix = [&](const void* data, size_t size) {
    for (size_t i = 0; i < size; ++i)
      hash = (hash ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  };
  for (const auto& [name, value] : counters) {
    mix(name.data(), name.size());
    mix(&value, sizeof value);
  }
  return static_cast<int64_t>(hash >> 1);
}

std::string describe_views(const std::vector<int64_t>& all,
                           const std::map<std::string, int64_t>& mine, int my_rank) {
  std::ostringstream out;
  for (size_t r = 0; r < all.size() / 2; ++r) {
    const int64_t outcome = all[2 * r];
    out << (r ? "; " : "") << "rank " << r << ": "
        << (outcome == kMissing  ? "no file"
            : outcome == kFailed ? "read failed"
                                 : "loaded");
    if (outcome == kLoaded) out << " (counters digest " << all[2 * r + 1] << ")";
  }
  out << "; this is rank " << my_rank << ", whose counters are";
  for (const auto& [name, value] : mine) out << " " << name << "=" << value;
  return out.str();
}

}  // namespace

bool load_checkpoint(ProcessGroup& group, const std::string& path, CheckpointState* state,
                     const CheckpointOptions& options) {
  std::array<int64_t, 2> mine{kMissing, 0};
  std::exception_ptr failure;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    try {
      read_checkpoint(path, state);
      mine = {kLoaded, counters_digest(state->counters)};
    } catch (...) {
      failure = std::current_exception();
      mine = {kFailed, 0};
    }
  }
  std::vector<int64_t> all(2 * static_cast<size_t>(group.size()));
  group
      .all_gather(ConstBufferView(mine.data(), 2, DType::i64), view(all),
                  {.timeout = options.timeout})
      ->wait();
  if (failure) std::rethrow_exception(failure);
  bool agree = true;
  for (size_t r = 0; r < all.size() / 2; ++r) {
    agree = agree && all[2 * r] == all[0] && all[2 * r + 1] == all[1];
  }
  if (!agree) {
    throw MismatchError(
        concat("load_checkpoint(", path, "): the ranks of group ", group.name(),
               " see different checkpoints (", describe_views(all, state->counters, group.rank()),
               "). Put checkpoints in a folder every rank sees (one host or a shared "
               "filesystem), and check the failing rank's log"));
  }
  return all[0] == kLoaded;
}

}  // namespace lockstep::torch
