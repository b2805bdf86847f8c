// Failure handling shared by every backend and the group's progress thread: the error classes, how
// an error is raised again with its class (after crossing a thread or a process), a backend's
// first failure, and the abort note peers read to learn why a group broke.
//
// [Error classes] Every lockstep exception type has an ErrorClass. An error keeps its class on
// every trip: from a backend's run() through the progress thread to the caller's Work::wait, and
// into the message of every later op of a broken group. Only the abort frame that tells a peer
// narrows it: a peer raises the sender's mismatch or timeout as such, and anything else as a
// NetworkError, since from the peer's side a rank went away (peer_class).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "comm/op.h"
#include "lockstep/store/store.h"

namespace lockstep {

// One per exception type of lockstep/core/error.h. The numbers go on the wire (abort frames, the
// shm abort record): keep them.
enum class ErrorClass : uint8_t {
  other = 0,             // Error, or anything that is not a lockstep exception
  network = 1,           // NetworkError
  mismatch = 2,          // MismatchError
  timeout = 3,           // TimeoutError
  store = 4,             // StoreError
  invalid_argument = 5,  // InvalidArgument
  config = 6,            // ConfigError
  auth = 7,              // AuthError
};

// The class of a lockstep exception (other for anything else).
ErrorClass error_class_of(const std::exception& e);
ErrorClass error_class_of(const std::exception_ptr& e);
// Throws the exception type of error_class with message.
[[noreturn]] void throw_as(ErrorClass error_class, const std::string& message);
// Throws an exception of original's class with message.
[[noreturn]] void rethrow_as(const std::exception_ptr& original, const std::string& message);
// what() of e ("unknown error" for a non-standard exception).
std::string what_of(const std::exception_ptr& e);
// The class a peer raises for this rank's failure ([Error classes]).
ErrorClass peer_class(ErrorClass error_class);

// [Relays] A rank that fails because a peer aborted raises the peer's reason first (the root
// cause), then says once how it learned it: "<root cause> (relayed by rank 0 (host a, pid 7) to
// rank 2 in all_reduce #0)". A reason relayed again keeps its root cause and only the newest
// relay, however many ranks and stages it crossed.
inline constexpr std::string_view kRelayMark = " (relayed by ";
std::string relayed(std::string_view reason, std::string_view from, int to_rank,
                    std::string_view op_name);

// A backend's first failure. After it the group is broken: every later op fails at once with the
// same error class and a message that repeats the cause. Used by one thread at a time (the
// progress thread, or the caller's for an inline op).
class FirstFailure {
 public:
  // Records the failure unless one is recorded already; returns whether this one was the first.
  bool record(ErrorClass error_class, const std::string& reason);
  bool happened() const { return happened_; }
  // Throws "<op>: the group is broken: <cause>" with the first failure's class, if there was one.
  void throw_if_happened(const Op& op) const;

 private:
  bool happened_ = false;
  ErrorClass class_ = ErrorClass::network;
  std::string reason_;
};

// [Abort notes] The first rank of a group to fail leaves "rank R (host h): reason" under
// "<group>/abort" in the store, so that a peer that only sees a connection close (or an MPI or
// NCCL call fail) can say why.
std::string abort_key(const std::string& group);
// Best effort: records the note unless another rank was first. Never throws.
void write_abort_note(Store& store, const std::string& group, int rank, const std::string& host,
                      const std::string& reason);
// Best effort: the note another rank left, waiting at most `wait`. Never throws.
std::optional<std::string> read_abort_note(Store& store, const std::string& group,
                                           std::chrono::milliseconds wait);

}  // namespace lockstep
