// Error hierarchy. Every lockstep failure is one of these exceptions, and every message says what
// happened, on which rank, in which op, and what to do about it.
#pragma once

#include <charconv>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace lockstep {

// Base of every lockstep exception.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A call was rejected before any communication happened: a bad argument, a root outside the
// group, a buffer of the wrong size. The group stays usable.
class InvalidArgument : public Error {
  using Error::Error;
};

// Setup failed: missing or malformed environment variables, an unknown init method or backend.
class ConfigError : public Error {
  using Error::Error;
};

// A peer died, closed its connection, sent garbage, or could not be reached.
class NetworkError : public Error {
  using Error::Error;
};

// A deadline passed.
class TimeoutError : public Error {
  using Error::Error;
};

// A store operation failed (other than by timing out).
class StoreError : public Error {
  using Error::Error;
};

// A connection's peer could not prove it knows the job's secret, or this process could not
// prove it: different --secret-file on different nodes, or a secret on one side only.
class AuthError : public Error {
  using Error::Error;
};

// Ranks disagree about a collective: a different op, order, size, dtype, root or reduce op.
class MismatchError : public Error {
  using Error::Error;
};

namespace detail {
// Appends one part as `out << part` would: text and integers directly (concat runs on hot paths,
// such as naming every send and recv), anything else through a stream.
template <class T>
void append_part(std::string& s, const T& part) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    s += std::string_view(part);
  } else if constexpr (std::is_same_v<T, char>) {
    s += part;
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                       !std::is_same_v<T, signed char> && !std::is_same_v<T, unsigned char>) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, part).ptr;
    s.append(digits, end);
  } else {
    std::ostringstream out;
    out << part;
    s += out.str();
  }
}

template <class... Args>
std::string concat(const Args&... args) {
  std::string s;
  (append_part(s, args), ...);
  return s;
}
}  // namespace detail

}  // namespace lockstep

// LOCKSTEP_ENFORCE(cond, ErrorType, message parts...): throws ErrorType with the message parts
// streamed together, when cond is false. Use for checks that a user can trigger.
#define LOCKSTEP_ENFORCE(cond, ErrorType, ...)                             \
  do {                                                                     \
    if (!(cond)) throw ErrorType(::lockstep::detail::concat(__VA_ARGS__)); \
  } while (0)

// LOCKSTEP_CHECK_EQ(a, b, ErrorType, context...): throws ErrorType naming both operand values,
// the file and the line, when a != b.
#define LOCKSTEP_CHECK_EQ(a, b, ErrorType, ...)                                                 \
  do {                                                                                          \
    const auto& lockstep_a_ = (a);                                                              \
    const auto& lockstep_b_ = (b);                                                              \
    if (!(lockstep_a_ == lockstep_b_))                                                          \
      throw ErrorType(::lockstep::detail::concat(__VA_ARGS__, " (" #a " = ", lockstep_a_,       \
                                                 ", " #b " = ", lockstep_b_, ", at ", __FILE__, \
                                                 ":", __LINE__, ")"));                          \
  } while (0)
