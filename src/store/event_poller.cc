#include "store/event_poller.h"

#include <cerrno>

#include "lockstep/core/error.h"

namespace lockstep::store_detail {

namespace {
uint32_t interest(bool read, bool write) {
  return (read ? EPOLLIN : 0u) | (write ? EPOLLOUT : 0u);
}
}  // namespace

EventPoller::EventPoller(int max_events)
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)), events_(static_cast<size_t>(max_events)) {
  LOCKSTEP_ENFORCE(epoll_.valid(), NetworkError,
                   "store server: epoll_create1 failed: ", net::errno_text(errno));
}

void EventPoller::add(int fd, uint64_t key, bool read, bool write) {
  epoll_event e{.events = interest(read, write), .data = {.u64 = key}};
  LOCKSTEP_ENFORCE(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) == 0, NetworkError,
                   "store server: epoll_ctl(ADD) failed: ", net::errno_text(errno));
}

void EventPoller::modify(int fd, uint64_t key, bool read, bool write) {
  epoll_event e{.events = interest(read, write), .data = {.u64 = key}};
  LOCKSTEP_ENFORCE(::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &e) == 0, NetworkError,
                   "store server: epoll_ctl(MOD) failed: ", net::errno_text(errno));
}

void EventPoller::remove(int fd) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);  // closing fd would remove it anyway
}

std::span<const epoll_event> EventPoller::wait(int timeout_ms) {
  int n = ::epoll_wait(epoll_.get(), events_.data(), static_cast<int>(events_.size()), timeout_ms);
  if (n < 0 && errno == EINTR) return {};
  LOCKSTEP_ENFORCE(n >= 0, NetworkError,
                   "store server: epoll_wait failed: ", net::errno_text(errno));
  return {events_.data(), static_cast<size_t>(n)};
}

}  // namespace lockstep::store_detail
