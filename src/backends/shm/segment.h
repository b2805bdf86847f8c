// Segment: one group's shared-memory segment, created in /dev/shm by rank 0 and mapped by every
// rank.
//
// [Segment lifetime] Rank 0 creates "/dev/shm/lockstep-<group>-<pid>-<token>" (the token is
// random, so concurrent jobs and restarts never collide), reserves its full size with
// posix_fallocate (a full /dev/shm is a clear error up front, never a SIGBUS later) and publishes
// the name through the store. Every rank maps it and counts itself in the header; the last one to
// map unlinks the name. From then on the memory lives only as long as the mappings, so a crash
// leaves nothing in /dev/shm. A setup that fails or times out unlinks the name as well, and rank 0
// removes names left behind by creators that died during setup.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backends/shm/layout.h"
#include "lockstep/core/deadline.h"
#include "lockstep/store/store.h"

namespace lockstep::shm {

struct SegmentOptions {
  std::string group;  // the group's name (unique in the job)
  int rank = 0;
  int size = 1;
  Store* store = nullptr;  // where rank 0 publishes the segment name
  Deadline deadline{Clock::now()};
};

// [Shared files] The protocol of [Segment lifetime] for any file whose first bytes are a
// SegmentHeader (the group's segment, and the buffers of ProcessGroup::allocate: shared_alloc.h).
struct SharedFile {
  std::string key;      // store key under which rank 0 publishes the file's name
  std::string tag;      // goes into the file name (after the prefix): the group's name and more
  uint64_t bytes = 0;   // the whole file
  uint64_t magic = 0;   // SegmentHeader::magic of this kind of file
  std::string needs;    // for a full /dev/shm: "the shm backend needs a shared-memory segment"
  std::string subject;  // "the shared-memory segment"
  std::string fix;      // what to do when ranks never attach
  // Marks this rank present in the new mapping (before it counts itself as attached).
  std::function<void(std::byte* base)> mark_present;
  // The ranks that have not marked themselves present: "[1, 3]".
  std::function<std::string(std::byte* base)> absent;
};

// Collective over the group: creates (rank 0) or opens the file, maps it and waits until every
// rank has mapped it; the last one to map unlinks the name. Returns the mapping (munmap(base,
// file.bytes) releases it) and the name it had. Throws as Segment::attach does.
struct SharedMapping {
  std::byte* base = nullptr;
  std::string path;
};
SharedMapping attach_shared_file(const SegmentOptions& options, const SharedFile& file);

// A mapped segment. Owns the mapping (unmapped on destruction); the name is already unlinked.
class Segment {
 public:
  // Collective over the group: creates (rank 0) or opens the segment, maps it, records this
  // rank's pid and waits until every rank has mapped it. Throws ConfigError when /dev/shm lacks
  // space (naming the size needed and the free space), TimeoutError naming the ranks that never
  // attached, and StoreError/TimeoutError from the store.
  static std::unique_ptr<Segment> attach(const SegmentOptions& options);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const SegmentView& view() const { return view_; }
  const std::string& path() const { return path_; }

 private:
  Segment(void* base, const Layout& layout, std::string path);

  void* base_;
  SegmentView view_;
  std::string path_;
};

}  // namespace lockstep::shm
