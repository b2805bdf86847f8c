// Sharded checkpoints, the parts without LibTorch (src/torch/sharded_io.h).
#include "torch/sharded_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "lockstep/core/error.h"

namespace lockstep::torch::sharded {
namespace {

namespace fs = std::filesystem;
using detail::concat;

std::string errno_text() {
  return concat(std::strerror(errno), " (errno ", errno, ")");
}

[[noreturn]] void throw_as(int64_t kind, const std::string& message) {
  switch (kind) {
    case kInvalidArgument:
      throw InvalidArgument(message);
    case kConfigError:
      throw ConfigError(message);
    case kMismatchError:
      throw MismatchError(message);
    case kTimeout:
      throw TimeoutError(message);
    case kNetwork:
      throw NetworkError(message);
    default:
      throw Error(message);
  }
}

}  // namespace

Outcome outcome_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument& e) {
    return {kInvalidArgument, e.what()};
  } catch (const ConfigError& e) {
    return {kConfigError, e.what()};
  } catch (const MismatchError& e) {
    return {kMismatchError, e.what()};
  } catch (const TimeoutError& e) {
    return {kTimeout, e.what()};
  } catch (const NetworkError& e) {
    return {kNetwork, e.what()};
  } catch (const std::exception& e) {
    return {kOther, e.what()};
  } catch (...) {
    return {kOther, "an exception that is not a std::exception"};
  }
}

void agree(ProcessGroup& group, const Outcome& mine, const std::string& what,
           const std::string& after, std::chrono::milliseconds timeout) {
  const auto world = static_cast<size_t>(group.size());
  const std::array<int64_t, 2> record{mine.kind, static_cast<int64_t>(mine.message.size())};
  std::vector<int64_t> all(2 * world);
  group.all_gather(ConstBufferView(record.data(), 2, DType::i64), view(all), {.timeout = timeout})
      ->wait();
  std::vector<size_t> counts(world);
  std::vector<size_t> failed;
  for (size_t r = 0; r < world; ++r) {
    counts[r] = static_cast<size_t>(all[2 * r + 1]);
    if (all[2 * r] != kOk) failed.push_back(r);
  }
  if (failed.empty()) return;
  std::string text(std::accumulate(counts.begin(), counts.end(), size_t{0}), '\0');
  group
      .all_gather_v(ConstBufferView(mine.message.data(), mine.message.size(), DType::u8),
                    BufferView(text.data(), text.size(), DType::u8), counts, {.timeout = timeout})
      ->wait();
  const size_t me = static_cast<size_t>(group.rank());
  const size_t who = mine.kind != kOk ? me : failed.front();
  const size_t at =
      std::accumulate(counts.begin(), counts.begin() + static_cast<long>(who), size_t{0});
  std::string others;
  for (size_t r : failed) {
    if (r != who) others += concat(others.empty() ? "" : ", ", r);
  }
  const char* also = failed.size() > 2 ? " (ranks " : " (rank ";
  throw_as(all[2 * who], concat(what, ": rank ", who, " failed: ", text.substr(at, counts[who]),
                                after, others.empty() ? "" : concat(also, others, " failed too)")));
}

int64_t crc_of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < bytes.size();) {
    const auto n = static_cast<uInt>(std::min<size_t>(bytes.size() - at, size_t{1} << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), n);
    at += n;
  }
  return static_cast<int64_t>(crc);
}

std::string read_whole(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw ConfigError(concat("sharded checkpoint: ", path, " does not exist or is not a file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf()) || in.bad()) {
    throw ConfigError(concat("sharded checkpoint: cannot read ", path, ": ", errno_text()));
  }
  return bytes.str();
}

std::string read_checked(const std::string& dir, const FileEntry& file) {
  const std::string path = (fs::path(dir) / file.name).string();
  std::string bytes = read_whole(path);
  const int64_t crc = crc_of(bytes);
  if (static_cast<int64_t>(bytes.size()) != file.size || crc != file.crc) {
    throw ConfigError(concat("sharded checkpoint: ", path, " is ", bytes.size(),
                             " bytes of CRC-32 ", crc, ", but the index records ", file.size,
                             " bytes of CRC-32 ", file.crc,
                             ": the file was changed or damaged after the save"));
  }
  return bytes;
}

void sync_folder(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = errno_text();
    if (fd >= 0) ::close(fd);
    throw ConfigError(concat("sharded checkpoint: syncing folder ", folder, " failed: ", why));
  }
  ::close(fd);
}

void make_folder(const std::string& dir, const std::string& name) {
  const fs::path folder = fs::path(dir) / name;
  std::error_code ec;
  fs::create_directory(folder, ec);
  if (ec) throw ConfigError(concat("cannot create ", folder.string(), ": ", ec.message()));
  sync_folder(dir);
}

std::optional<int64_t> generation_of(const std::string& name) {
  const std::string prefix = kGenerationPrefix;
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 15 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(digits);
}

int64_t highest_generation_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(concat("sharded checkpoint folder ", dir,
                             " does not exist or is not a folder; create it first"));
  }
  int64_t highest = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    highest = std::max(highest, generation_of(entry.path().filename().string()).value_or(0));
  if (ec) throw ConfigError(concat("sharded checkpoint: cannot list ", dir, ": ", ec.message()));
  return highest;
}

void check_visible(const std::string& dir, const std::vector<FileEntry>& files) {
  for (size_t k = 0; k < files.size(); ++k) {
    const std::string path = (fs::path(dir) / files[k].name).string();
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    LOCKSTEP_ENFORCE(!ec && static_cast<int64_t>(size) == files[k].size, ConfigError,
                     "rank 0 does not see ", path, " (", files[k].size, " bytes, written by rank ",
                     k == 0 ? 0 : k - 1, ") whole: every rank must see the same folder (one host ",
                     "or a shared filesystem)");
  }
}

void remove_other_generations(const std::string& dir, const std::string& keep) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != keep && generation_of(name)) stale.push_back(entry.path());
  }
  for (const auto& path : stale) fs::remove_all(path, ec);
}

void check_same_index(ProcessGroup& group, const std::array<int64_t, 3>& seen,
                      const std::string& what, std::chrono::milliseconds timeout) {
  const auto world = static_cast<size_t>(group.size());
  std::vector<int64_t> all(3 * world);
  group.all_gather(ConstBufferView(seen.data(), 3, DType::i64), view(all), {.timeout = timeout})
      ->wait();
  std::ostringstream views;
  bool same = true;
  for (size_t r = 0; r < world; ++r) {
    same = same && std::equal(all.begin() + 3 * r, all.begin() + 3 * r + 3, all.begin());
    views << (r ? "; " : "") << "rank " << r << ": "
          << (all[3 * r] == 0
                  ? "no checkpoint"
                  : concat("generation ", all[3 * r + 1], ", index CRC-32 ", all[3 * r + 2]));
  }
  LOCKSTEP_ENFORCE(same, MismatchError, what, ": the ranks of group ", group.name(),
                   " see different checkpoints (", views.str(),
                   "). Put the folder where every rank sees it (one host or a shared filesystem)");
}

int64_t agree_on_plan(ProcessGroup& group, const std::array<int64_t, kPlanSize>& plan,
                      const std::string& what, std::chrono::milliseconds timeout) {
  const auto world = static_cast<size_t>(group.size());
  std::vector<int64_t> plans(kPlanSize * world);
  group
      .all_gather(ConstBufferView(plan.data(), kPlanSize, DType::i64), view(plans),
                  {.timeout = timeout})
      ->wait();
  auto at = [&](size_t r, size_t k) { return plans[r * kPlanSize + k]; };
  std::ostringstream each;
  bool same_kind = true, same_cursor = true;
  for (size_t r = 0; r < world; ++r) {
    same_kind = same_kind && at(r, 1) == at(0, 1) && at(r, 2) == at(0, 2);
    for (size_t k = 3; k < kPlanSize; ++k) same_cursor = same_cursor && at(r, k) == at(0, k);
    each << (r ? "; " : "") << "rank " << r << ": "
         << (at(r, 1) < 0 ? "no optimizer" : concat("an optimizer of ", at(r, 1), " parameters"))
         << (at(r, 2) == 0 ? ", no sampler"
                           : concat(", sampler at epoch ", at(r, 3), " [", at(r, 4), ", ", at(r, 5),
                                    ") of ", at(r, 6), " samples, seed ", at(r, 7)));
  }
  LOCKSTEP_ENFORCE(same_kind, InvalidArgument, what, ": the ranks pass different states (",
                   each.str(), "); every rank passes the same optimizer and sampler, or none");
  LOCKSTEP_ENFORCE(same_cursor, MismatchError, what,
                   ": the ranks' samplers stand at different places (", each.str(),
                   "); save where every rank has taken the same batches");
  int64_t highest = 0;
  for (size_t r = 0; r < world; ++r) highest = std::max(highest, at(r, 0));
  return highest + 1;
}

}  // namespace lockstep::torch::sharded
