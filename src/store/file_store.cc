// FileStore: every operation takes flock(2) on the shared file (shared for reads, exclusive for
// writes), replays the records other processes appended since its last look (file_store_log.h),
// and, for writes, appends its own. Blocking calls poll, sleeping 1 ms doubling to 20 ms between
// looks, until their deadline. An in-process mutex serialises the threads of one FileStore,
// since flock does not exclude users of the same open file from each other.
#include "lockstep/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "core/log.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "net/socket.h"
#include "store/file_store_log.h"
#include "store/store_semantics.h"

namespace lockstep {

namespace sd = store_detail;

namespace {

// The log is compacted when it is more than twice its live size plus this.
constexpr size_t kCompactSlack = 64 * 1024;
constexpr milliseconds kFirstPoll{1};
constexpr milliseconds kMaxPoll{20};

[[noreturn]] void io_error(const std::string& path, const char* what) {
  throw StoreError(detail::concat("FileStore ", path, ": ", what,
                                  " failed: ", net::errno_text(errno),
                                  ". Check that the path is on a shared, writable filesystem."));
}

// Holds flock(2) on fd for its lifetime.
class FileLock {
 public:
  FileLock(int fd, int how, const std::string& path) : fd_(fd) {
    while (::flock(fd, how) != 0)
      if (errno != EINTR) io_error(path, "flock");
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

struct FileStore::Impl {
  std::string path;
  int world_size = -1;
  std::mutex mu;
  net::Fd fd;
  sd::ReplayedLog log;
  uint64_t generation = 0;  // of the replayed contents; 0: none yet
  uint64_t parsed_end = 0;  // file offset after the last replayed record

  uint64_t file_size() const;
  std::string read_at(uint64_t offset, size_t n) const;
  void write_at(uint64_t offset, std::string_view bytes) const;
  sd::FileHeader read_header() const;
  // Replays what others appended (REQUIRES: flock held).
  void refresh();
  // Appends records and applies them (REQUIRES: exclusive flock, refreshed).
  void append(const std::string& records);
  void maybe_compact();
  // Runs fn under mu and flock `how`, after a refresh.
  template <class Fn>
  auto locked(int how, Fn fn) {
    std::lock_guard<std::mutex> lock(mu);
    FileLock file_lock(fd.get(), how, path);
    refresh();
    return fn();
  }
  // Polls until keys all exist, then returns fn() (under the locks), or throws TimeoutError.
  template <class Fn>
  auto when_present(const std::vector<std::string>& keys, milliseconds timeout, const char* op,
                    Fn fn);
};

uint64_t FileStore::Impl::file_size() const {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) io_error(path, "fstat");
  return static_cast<uint64_t>(st.st_size);
}

std::string FileStore::Impl::read_at(uint64_t offset, size_t n) const {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd.get(), out.data() + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) io_error(path, "read");
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

void FileStore::Impl::write_at(uint64_t offset, std::string_view bytes) const {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done,
                         static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) io_error(path, "write");
    done += static_cast<size_t>(w);
  }
}

sd::FileHeader FileStore::Impl::read_header() const {
  sd::FileHeader h;
  if (!sd::decode_file_header(read_at(0, sd::kFileHeaderBytes), &h))
    throw StoreError(detail::concat("FileStore: ", path,
                                    " is not a lockstep FileStore file (wrong header). Choose "
                                    "another path, or delete the file if it is stale."));
  return h;
}

void FileStore::Impl::refresh() {
  sd::FileHeader h = read_header();
  if (h.generation != generation) {
    log = sd::ReplayedLog{};
    parsed_end = sd::kFileHeaderBytes;
    generation = h.generation;
  }
  uint64_t size = file_size();
  if (size <= parsed_end) return;
  std::string bytes = read_at(parsed_end, size - parsed_end);
  parsed_end += sd::replay_records(bytes, log, path);
}

void FileStore::Impl::append(const std::string& records) {
  // A writer that died mid-append leaves a torn record at the end; cut it off first.
  if (file_size() > parsed_end && ::ftruncate(fd.get(), static_cast<off_t>(parsed_end)) != 0)
    io_error(path, "ftruncate");
  write_at(parsed_end, records);
  parsed_end += sd::replay_records(records, log, path);
  maybe_compact();
}

void FileStore::Impl::maybe_compact() {
  if (parsed_end - sd::kFileHeaderBytes <= 2 * log.live_bytes + kCompactSlack) return;
  sd::FileHeader h = read_header();
  h.generation = generation + 1;
  std::string bytes = sd::encode_file_header(h);
  bytes.reserve(sd::kFileHeaderBytes + log.live_bytes);
  for (const auto& [key, value] : log.data) sd::append_set_record(bytes, key, value);
  write_at(0, bytes);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes.size())) != 0) io_error(path, "ftruncate");
  generation = h.generation;
  parsed_end = bytes.size();
}

template <class Fn>
auto FileStore::Impl::when_present(const std::vector<std::string>& keys, milliseconds timeout,
                                   const char* op, Fn fn) {
  auto deadline = Deadline::after(timeout);
  auto pause = kFirstPoll;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      FileLock file_lock(fd.get(), LOCK_SH, path);
      refresh();
      auto missing = sd::missing_keys(log.data, keys);
      if (missing.empty()) return fn();
      if (deadline.expired())
        throw TimeoutError(sd::timeout_message(op, missing, timeout, "FileStore " + path));
    }
    std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
    pause = std::min(pause * 2, kMaxPoll);
  }
}

FileStore::FileStore(const FileStoreOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->path = options.path;
  impl_->world_size = options.world_size;
  set_timeout(options.timeout);
  LOCKSTEP_ENFORCE(!options.path.empty(), InvalidArgument, "FileStore needs a path");
  impl_->fd = net::Fd(::open(options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!impl_->fd.valid()) io_error(options.path, "open");
  std::lock_guard<std::mutex> lock(impl_->mu);
  FileLock file_lock(impl_->fd.get(), LOCK_EX, impl_->path);
  if (impl_->file_size() == 0) impl_->write_at(0, sd::encode_file_header(sd::FileHeader{}));
  impl_->refresh();
}

FileStore::~FileStore() {
  if (impl_->world_size <= 0) return;
  try {
    std::lock_guard<std::mutex> lock(impl_->mu);
    FileLock file_lock(impl_->fd.get(), LOCK_EX, impl_->path);
    sd::FileHeader h = impl_->read_header();
    ++h.finished_users;
    impl_->write_at(0, sd::encode_file_header(h));
    if (h.finished_users >= impl_->world_size) ::unlink(impl_->path.c_str());
  } catch (const std::exception& e) {
    log_warning("FileStore ", impl_->path, ": could not record this user's exit: ", e.what());
  }
}

void FileStore::set(const std::string& key, std::string_view value) {
  std::string records;
  sd::append_set_record(records, key, value);
  impl_->locked(LOCK_EX, [&] { impl_->append(records); });
}

std::string FileStore::get(const std::string& key, milliseconds timeout) {
  return impl_->when_present({key}, resolve(timeout), "get",
                             [&] { return impl_->log.data.at(key); });
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  return impl_->locked(LOCK_EX, [&] {
    auto it = impl_->log.data.find(key);
    int64_t current = it == impl_->log.data.end() ? 0 : sd::parse_counter(key, it->second);
    int64_t result = sd::checked_sum(key, current, delta);
    std::string records;
    sd::append_set_record(records, key, std::to_string(result));
    impl_->append(records);
    return result;
  });
}

std::string FileStore::compare_set(const std::string& key, std::string_view expected,
                                   std::string_view desired) {
  return impl_->locked(LOCK_EX, [&] {
    auto it = impl_->log.data.find(key);
    std::string current = it == impl_->log.data.end() ? std::string() : it->second;
    if (current != expected) return current;
    std::string records;
    sd::append_set_record(records, key, desired);
    impl_->append(records);
    return std::string(desired);
  });
}

bool FileStore::check(const std::vector<std::string>& keys) {
  return impl_->locked(LOCK_SH, [&] { return sd::missing_keys(impl_->log.data, keys).empty(); });
}

void FileStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  impl_->when_present(keys, resolve(timeout), "wait", [] {});
}

bool FileStore::delete_key(const std::string& key) {
  return impl_->locked(LOCK_EX, [&] {
    if (!impl_->log.data.contains(key)) return false;
    std::string records;
    sd::append_delete_record(records, key);
    impl_->append(records);
    return true;
  });
}

int64_t FileStore::num_keys() {
  return impl_->locked(LOCK_SH, [&] { return static_cast<int64_t>(impl_->log.data.size()); });
}

std::vector<std::string> FileStore::multi_get(const std::vector<std::string>& keys,
                                              milliseconds timeout) {
  return impl_->when_present(keys, resolve(timeout), "multi_get",
                             [&] { return sd::values_of(impl_->log.data, keys); });
}

void FileStore::multi_set(const std::vector<std::string>& keys,
                          const std::vector<std::string>& values) {
  sd::check_multi_set_sizes(keys.size(), values.size(), "FileStore");
  std::string records;
  for (size_t i = 0; i < keys.size(); ++i) sd::append_set_record(records, keys[i], values[i]);
  impl_->locked(LOCK_EX, [&] { impl_->append(records); });
}

}  // namespace lockstep
