// Error hierarchy. Every lockstep failure is one of these exceptions, and every message says what
// happened, on which rank, in which op, and what to do about it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

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

// Ranks disagree about a collective: a different op, order, size, dtype, root or reduce op.
class MismatchError : public Error {
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace lockstep

// LOCKSTEP_ENFORCE(cond, ErrorType, message parts...): throws ErrorType with the message parts
// streamed together, when cond is false. Use for checks that a user can trigger.
#define LOCKSTEP_ENFORCE(cond, ErrorType, ...)                  \
  do {                                                          \
    if (!(cond)) throw ErrorType(::lockstep::detail::concat(__VA_ARGS__)); \
  } while (0)

// LOCKSTEP_CHECK_EQ(a, b, ErrorType, context...): throws ErrorType naming both operand values,
// the file and the line, when a != b.
#define LOCKSTEP_CHECK_EQ(a, b, ErrorType, ...)                                              \
  do {                                                                                       \
    const auto& lockstep_a_ = (a);                                                           \
    const auto& lockstep_b_ = (b);                                                           \
    if (!(lockstep_a_ == lockstep_b_))                                                       \
      throw ErrorType(::lockstep::detail::concat(__VA_ARGS__, " (" #a " = ", lockstep_a_,   \
                                                 ", " #b " = ", lockstep_b_, ", at ",       \
                                                 __FILE__, ":", __LINE__, ")"));             \
  } while (0)
