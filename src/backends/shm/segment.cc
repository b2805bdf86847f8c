#include "backends/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "net/socket.h"
#include "shmem/futex.h"
#include "shmem/shared_file.h"

namespace lockstep::shm {

namespace {

constexpr const char* kDir = shmem::kSharedDir;
constexpr const char* kErrorPrefix = "error:";

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

[[noreturn]] void throw_no_space(const SegmentOptions& o, const SharedFile& f, int error) {
  struct statvfs fs {};
  std::string free_text = "unknown";
  if (::statvfs(kDir, &fs) == 0) {
    uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    free_text = detail::concat(free_bytes, " bytes (", mib(free_bytes), ") of ",
                               mib(static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize));
  }
  throw ConfigError(detail::concat(
      "group '", o.group, "': ", f.needs, " of ", f.bytes, " bytes (", mib(f.bytes), ") in ", kDir,
      " for ", o.size, " ranks, but only ", free_text,
      " is free there (posix_fallocate: ", net::errno_text(error), "). Fix: free space in ", kDir,
      " or enlarge it (docker run --shm-size=1g; mount -o remount,size=2g ", kDir,
      "), or use the tcp backend"));
}

// Rank 0: creates, sizes (every byte reserved), maps and initialises the file's header. Returns
// the mapping.
void* create(const SegmentOptions& o, const SharedFile& f, const std::string& name) {
  const std::string path = shmem::shared_file_path(name);
  const shmem::CreatedFile c = shmem::create_shared_file(name, f.bytes, f.bytes, true);
  if (!c.created)
    throw ConfigError(detail::concat("group '", o.group, "': cannot create ", path, ": ",
                                     net::errno_text(c.error), ". Fix: check that ", kDir,
                                     " exists and is writable, or use the tcp backend"));
  if (!c.base) {
    if (c.error == ENOSPC) throw_no_space(o, f, c.error);
    throw ConfigError(detail::concat("group '", o.group, "': cannot size or map ", path, " (",
                                     f.bytes, " bytes): ", net::errno_text(c.error)));
  }
  void* base = c.base;
  auto* h = new (base) SegmentHeader();
  h->magic = f.magic;
  h->version = kLayoutVersion;
  h->nranks = o.size;
  h->total_bytes = f.bytes;
  std::snprintf(h->group, sizeof h->group, "%s", o.group.c_str());
  return base;
}

// Ranks other than 0: maps the file rank 0 published and checks that it is the one expected.
void* open_existing(const SegmentOptions& o, const SharedFile& f, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    throw NetworkError(detail::concat("group '", o.group, "': rank ", o.rank, " cannot open ", path,
                                      " that rank 0 created: ", net::errno_text(errno),
                                      " (did rank 0 fail, or do the ranks run on different "
                                      "hosts? the shm backend needs one host; use tcp otherwise)"));
  struct stat st {};
  void* base = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == f.bytes
                   ? shmem::map_shared(fd, f.bytes, 0, MAP_POPULATE)
                   : nullptr;
  ::close(fd);
  auto* h = static_cast<SegmentHeader*>(base);
  if (!h || h->magic != f.magic || h->version != kLayoutVersion || h->nranks != o.size) {
    if (base) ::munmap(base, f.bytes);
    throw ConfigError(detail::concat("group '", o.group, "': ", path,
                                     " is not a lockstep segment for ", o.size,
                                     " ranks of this version (do all ranks run the same "
                                     "lockstep build with the same world size?)"));
  }
  return base;
}

// Waits until every rank has mapped the file (then the last one has unlinked it).
void wait_all_attached(std::byte* base, const SegmentOptions& o, const SharedFile& f,
                       const std::string& path) {
  SegmentHeader& h = *reinterpret_cast<SegmentHeader*>(base);
  const uint32_t n = static_cast<uint32_t>(o.size);
  for (;;) {
    uint32_t seen = h.attached.load();
    if (seen >= n) return;
    if (o.deadline.expired()) {
      ::unlink(path.c_str());  // nobody else will: the count never completes
      throw TimeoutError(detail::concat("group '", o.group, "': ranks ", f.absent(base), " of ",
                                        o.size, " never attached to ", f.subject,
                                        " (waited until the group's timeout). Fix: ", f.fix,
                                        "; check those ranks' output"));
    }
    h.attached_waiters.fetch_add(1);
    if (h.attached.load() == seen)
      shmem::futex_wait(h.attached, seen,
                        std::min<std::chrono::nanoseconds>(o.deadline.remaining(),
                                                           std::chrono::milliseconds(100)));
    h.attached_waiters.fetch_sub(1);
  }
}

}  // namespace

SharedMapping attach_shared_file(const SegmentOptions& o, const SharedFile& f) {
  std::string path;
  void* mapped = nullptr;
  if (o.rank == 0) {
    shmem::sweep_stale_files();
    const std::string name = shmem::shared_file_name(f.tag);
    path = shmem::shared_file_path(name);
    try {
      mapped = create(o, f, name);
    } catch (const Error& e) {
      o.store->set(f.key, kErrorPrefix + std::string(e.what()));
      throw;
    }
    o.store->set(f.key, path);
  } else {
    path = o.store->get(f.key, o.deadline.remaining());
    if (path.rfind(kErrorPrefix, 0) == 0)
      throw ConfigError(detail::concat("rank 0 could not set up ", f.subject, ": ",
                                       path.substr(std::strlen(kErrorPrefix))));
    mapped = open_existing(o, f, path);
  }
  auto* base = static_cast<std::byte*>(mapped);
  SegmentHeader& h = *reinterpret_cast<SegmentHeader*>(base);
  f.mark_present(base);
  if (h.attached.fetch_add(1) + 1 == static_cast<uint32_t>(o.size)) {
    ::unlink(path.c_str());
    shmem::futex_wake_all(h.attached);
  }
  try {
    wait_all_attached(base, o, f, path);
  } catch (...) {
    ::munmap(base, f.bytes);
    throw;
  }
  if (o.rank == 0)
    o.store->delete_key(f.key);  // every rank has read it; a later group may reuse the name
  return {base, path};
}

Segment::Segment(void* base, const Layout& layout, std::string path)
    : base_(base), view_(static_cast<std::byte*>(base), layout), path_(std::move(path)) {}

Segment::~Segment() {
  ::munmap(base_, view_.layout().total);
}

std::unique_ptr<Segment> Segment::attach(const SegmentOptions& o) {
  const Layout layout = layout_for(o.size);
  auto control = [layout](std::byte* base, int r) -> RankControl& {
    return SegmentView(base, layout).control(r);
  };
  const SharedFile file{
      .key = o.group + "/shm/segment",
      .tag = o.group,
      .bytes = layout.total,
      .magic = kSegmentMagic,
      .needs = "the shm backend needs a shared-memory segment",
      .subject = "the shared-memory segment",
      .fix = "every rank must create the group",
      .mark_present =
          [&](std::byte* base) {
            RankControl& me = control(base, o.rank);
            me.pid.store(static_cast<int32_t>(::getpid()));
            me.state.store(static_cast<uint32_t>(RankState::attached));
          },
      .absent =
          [&](std::byte* base) {
            std::string list;
            for (int r = 0; r < o.size; ++r)
              if (control(base, r).state.load() == static_cast<uint32_t>(RankState::absent))
                list += (list.empty() ? "" : ", ") + std::to_string(r);
            return "[" + list + "]";
          }};
  SharedMapping mapped = attach_shared_file(o, file);
  return std::unique_ptr<Segment>(new Segment(mapped.base, layout, std::move(mapped.path)));
}

}  // namespace lockstep::shm
