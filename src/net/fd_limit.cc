#include "net/fd_limit.h"

#include <sys/resource.h>

#include <algorithm>

namespace lockstep::net {

namespace {
uint64_t from_rlim(rlim_t v) {
  return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v);
}
}  // namespace

FdLimit fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return {};
  return {from_rlim(r.rlim_cur), from_rlim(r.rlim_max)};
}

FdLimit raise_fd_limit(uint64_t want) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return {};
  const uint64_t target = std::min(want, from_rlim(r.rlim_max));
  if (target > from_rlim(r.rlim_cur)) {
    r.rlim_cur = static_cast<rlim_t>(target);
    ::setrlimit(RLIMIT_NOFILE, &r);  // on refusal the limits stay as they were
  }
  return fd_limit();
}

}  // namespace lockstep::net
