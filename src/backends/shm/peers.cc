#include "backends/shm/peers.h"

#include <poll.h>
#include <unistd.h>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "net/socket.h"
#include "shmem/processes.h"

namespace lockstep::shm {

namespace {

std::string header_name(const MessageHeader& h) {
  std::string s(op_kind_name(h.kind));
  if (h.variable) s += "_v";
  return s + " #" + std::to_string(h.seq);
}

}  // namespace

Peers::Peers(const SegmentView& segment, int rank, std::string host)
    : segment_(segment), rank_(rank), host_(std::move(host)) {
  const int own_pid = static_cast<int>(::getpid());
  pidfds_.assign(static_cast<size_t>(segment.size()), -1);
  for (int r = 0; r < segment.size(); ++r) {
    const int pid = segment.control(r).pid.load();
    if (r == rank || pid == own_pid) continue;
    int fd = shmem::open_pidfd(pid);
    if (fd < 0) {
      // ESRCH: the rank is already gone; anything else (another pid namespace): not watchable.
      log_warning("shm group '", segment.header().group, "': cannot watch ", describe(r), ": ",
                  net::errno_text(errno),
                  errno == ESRCH ? "" : "; its death will show as a timeout");
      if (errno != ESRCH) continue;
    }
    pidfds_[static_cast<size_t>(r)] = fd;
    watched_.push_back(r);
  }
}

Peers::~Peers() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

std::string Peers::describe(int r) const {
  return detail::concat("rank ", r, " (host ", host_, ", pid ", segment_.control(r).pid.load(),
                        ")");
}

std::optional<int> Peers::first_dead() const {
  if (watched_.empty()) return std::nullopt;
  std::vector<pollfd> fds;
  fds.reserve(watched_.size());
  for (int r : watched_) fds.push_back({.fd = pidfds_[static_cast<size_t>(r)], .events = POLLIN});
  // An fd of -1 (the rank was gone at setup) is ignored by poll: report it directly.
  for (int r : watched_)
    if (pidfds_[static_cast<size_t>(r)] < 0 && !departed(r)) return r;
  if (::poll(fds.data(), fds.size(), 0) <= 0) return std::nullopt;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents != 0 && !departed(watched_[i])) return watched_[i];
  return std::nullopt;
}

bool Peers::departed(int r) const {
  return segment_.control(r).state.load(std::memory_order_acquire) ==
         static_cast<uint32_t>(RankState::departed);
}

std::string Peers::last_op_of(int r) const {
  const RankControl& c = segment_.control(r);
  const MessageHeader* last = nullptr;
  for (const Descriptor& d : c.desc)
    if (d.header.magic == kMessageMagic && (!last || d.header.seq >= last->seq)) last = &d.header;
  return last ? "its last collective was " + header_name(*last)
              : std::string("it has not entered any collective of this group");
}

}  // namespace lockstep::shm
