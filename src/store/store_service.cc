#include "store/store_service.h"

#include <algorithm>

#include "lockstep/core/error.h"
#include "store/store_semantics.h"

namespace lockstep::store_detail {

using store_proto::Command;
using store_proto::Message;
using store_proto::Status;

namespace {
// Longest wait the server accepts; longer timeouts are clamped (a year is "forever" here).
constexpr std::chrono::milliseconds kMaxWait = std::chrono::hours(24 * 365);
}  // namespace

void StoreService::handle(uint64_t conn, Message request) {
  auto& s = request.strings;
  switch (static_cast<Command>(request.code)) {
    case Command::set:
      data_.insert_or_assign(s[0], std::move(s[1]));
      reply(conn, Status::ok);
      written(s[0]);
      return;
    case Command::get:
    case Command::wait:
    case Command::multi_get:
      handle_blocking(conn, request);
      return;
    case Command::add: {
      int64_t result = 0;
      try {
        result = add_counter(data_, s[0], request.number);
      } catch (const StoreError& e) {
        reply(conn, Status::error, 0, {e.what()});
        return;
      }
      reply(conn, Status::ok, result);
      written(s[0]);
      return;
    }
    case Command::compare_set: {
      bool changed = false;
      std::string value = compare_set_in(data_, s[0], s[1], s[2], &changed);
      reply(conn, Status::ok, 0, {std::move(value)});
      if (changed) written(s[0]);
      return;
    }
    case Command::check:
      reply(conn, Status::ok, missing_keys(data_, s).empty() ? 1 : 0);
      return;
    case Command::delete_key:
      reply(conn, Status::ok, data_.erase(s[0]) > 0 ? 1 : 0);
      return;
    case Command::num_keys:
      reply(conn, Status::ok, static_cast<int64_t>(data_.size()));
      return;
    case Command::multi_set:
      for (size_t i = 0; i < s.size(); i += 2) data_.insert_or_assign(s[i], s[i + 1]);
      reply(conn, Status::ok);
      for (size_t i = 0; i < s.size(); i += 2) written(s[i]);
      return;
  }
}

void StoreService::handle_blocking(uint64_t conn, Message& request) {
  auto command = static_cast<Command>(request.code);
  auto missing = missing_keys(data_, request.strings);
  if (missing.empty()) return reply_values(conn, command, request.strings);
  auto timeout =
      std::clamp(std::chrono::milliseconds(request.number), std::chrono::milliseconds(0), kMaxWait);
  if (timeout.count() == 0)
    return reply(conn, Status::timed_out, timeout.count(), std::move(missing));
  auto deadline = deadlines_.emplace(Clock::now() + timeout, conn);
  waiters_[missing.front()].push_back(conn);
  parked_.insert_or_assign(conn, Parked{.command = command,
                                        .keys = std::move(request.strings),
                                        .timeout = timeout,
                                        .waiting_on = missing.front(),
                                        .deadline = deadline});
}

void StoreService::reply_values(uint64_t conn, Command command,
                                const std::vector<std::string>& keys) {
  if (command == Command::wait) return reply(conn, Status::ok);
  reply(conn, Status::ok, 0, values_of(data_, keys));
}

void StoreService::reply(uint64_t conn, Status status, int64_t number,
                         std::vector<std::string> strings) {
  reply_(conn, Message{.code = static_cast<uint8_t>(status),
                       .number = number,
                       .strings = std::move(strings)});
}

void StoreService::written(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> conns = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t c : conns) {
    parked_.at(c).waiting_on.clear();
    recheck(c);
  }
}

void StoreService::recheck(uint64_t conn) {
  Parked& p = parked_.at(conn);
  auto missing = missing_keys(data_, p.keys);
  if (!missing.empty()) {
    p.waiting_on = missing.front();
    waiters_[p.waiting_on].push_back(conn);
    return;
  }
  Command command = p.command;
  std::vector<std::string> keys = std::move(p.keys);
  unpark(conn);
  reply_values(conn, command, keys);
}

void StoreService::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    uint64_t conn = deadlines_.begin()->second;
    Parked& p = parked_.at(conn);
    auto missing = missing_keys(data_, p.keys);
    auto timeout = p.timeout;
    unpark(conn);
    reply(conn, Status::timed_out, timeout.count(), std::move(missing));
  }
}

std::optional<Clock::time_point> StoreService::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

void StoreService::forget(uint64_t conn) {
  if (parked_.contains(conn)) unpark(conn);
}

void StoreService::unpark(uint64_t conn) {
  auto it = parked_.find(conn);
  if (!it->second.waiting_on.empty()) remove_waiter(it->second.waiting_on, conn);
  deadlines_.erase(it->second.deadline);
  parked_.erase(it);
}

void StoreService::remove_waiter(const std::string& key, uint64_t conn) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::erase(it->second, conn);
  if (it->second.empty()) waiters_.erase(it);
}

}  // namespace lockstep::store_detail
