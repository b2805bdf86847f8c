// Checks of messages: error paths that look at the message, not only the exception's type, and
// text that must contain a part. One name for each, for every test.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <typeinfo>

namespace lockstep::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// How many times part occurs in text (overlaps counted).
inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Runs fn, which must throw an E; returns its what(). Fails the test (and returns "") when fn
// throws nothing; an exception of another type propagates to the test, which fails with it.
template <class E, class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception of type " << typeid(E).name();
  return "";
}

// Expects fn to throw an E whose message contains every one of parts.
template <class E, class Fn>
void expect_error_naming(Fn&& fn, std::initializer_list<std::string> parts) {
  const std::string message = message_of<E>(fn);
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "the message lacks '" << part << "': " << message;
}

}  // namespace lockstep::testing

#define EXPECT_CONTAINS(text, part)                                    \
  EXPECT_NE(std::string_view(text).find(part), std::string_view::npos) \
      << "expected to find \"" << (part) << "\" in:\n  " << (text)
