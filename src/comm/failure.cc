#include "comm/failure.h"

#include <algorithm>

#include "lockstep/core/error.h"

namespace lockstep {

ErrorClass error_class_of(const std::exception& e) {
  if (dynamic_cast<const MismatchError*>(&e)) return ErrorClass::mismatch;
  if (dynamic_cast<const TimeoutError*>(&e)) return ErrorClass::timeout;
  if (dynamic_cast<const NetworkError*>(&e)) return ErrorClass::network;
  if (dynamic_cast<const StoreError*>(&e)) return ErrorClass::store;
  if (dynamic_cast<const InvalidArgument*>(&e)) return ErrorClass::invalid_argument;
  if (dynamic_cast<const ConfigError*>(&e)) return ErrorClass::config;
  if (dynamic_cast<const AuthError*>(&e)) return ErrorClass::auth;
  return ErrorClass::other;
}

ErrorClass error_class_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return error_class_of(ex);
  } catch (...) {
    return ErrorClass::other;
  }
}

void throw_as(ErrorClass error_class, const std::string& message) {
  switch (error_class) {
    case ErrorClass::network:
      throw NetworkError(message);
    case ErrorClass::mismatch:
      throw MismatchError(message);
    case ErrorClass::timeout:
      throw TimeoutError(message);
    case ErrorClass::store:
      throw StoreError(message);
    case ErrorClass::invalid_argument:
      throw InvalidArgument(message);
    case ErrorClass::config:
      throw ConfigError(message);
    case ErrorClass::auth:
      throw AuthError(message);
    case ErrorClass::other:
      break;
  }
  throw Error(message);
}

void rethrow_as(const std::exception_ptr& original, const std::string& message) {
  throw_as(error_class_of(original), message);
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

std::string relayed(std::string_view reason, std::string_view from, int to_rank,
                    std::string_view op_name) {
  std::string_view root = reason.substr(0, std::min(reason.rfind(kRelayMark), reason.size()));
  if (root.empty()) root = "(no reason received)";
  return detail::concat(root, kRelayMark, from, " to rank ", to_rank, " in ", op_name, ")");
}

ErrorClass peer_class(ErrorClass error_class) {
  return error_class == ErrorClass::mismatch || error_class == ErrorClass::timeout
             ? error_class
             : ErrorClass::network;
}

bool FirstFailure::record(ErrorClass error_class, const std::string& reason) {
  if (happened_) return false;
  happened_ = true;
  class_ = error_class;
  reason_ = reason;
  return true;
}

void FirstFailure::throw_if_happened(const Op& op) const {
  if (happened_) throw_as(class_, detail::concat(op.name(), ": the group is broken: ", reason_));
}

std::string abort_key(const std::string& group) {
  return group + "/abort";
}

void write_abort_note(Store& store, const std::string& group, int rank, const std::string& host,
                      const std::string& reason) {
  try {
    store.compare_set(abort_key(group), "",
                      detail::concat("rank ", rank, " (host ", host, "): ", reason));
  } catch (...) {
    // The store may be gone with the rank that hosted it; the backends' own signals still tell
    // the peers.
  }
}

std::optional<std::string> read_abort_note(Store& store, const std::string& group,
                                           std::chrono::milliseconds wait) {
  try {
    return store.get(abort_key(group), wait);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace lockstep
