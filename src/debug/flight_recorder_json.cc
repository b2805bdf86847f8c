#include "debug/flight_recorder_json.h"

#include <limits>

#include "lockstep/core/error.h"

namespace lockstep::debug::json {

namespace {

// "an integer", "a string", ... for the type errors.
std::string describe(const Json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number with a fraction";
  std::string name = v.type_name();
  bool vowel = name[0] == 'a' || name[0] == 'o';
  return (v.is_null() ? "" : (vowel ? "an " : "a ")) + name;
}

[[noreturn]] void wrong_type(std::string_view key, const char* expected, const Json& v) {
  throw InvalidArgument(
      detail::concat("JSON: member \"", key, "\" must be ", expected, ", found ", describe(v)));
}

}  // namespace

std::string to_text(const OrderedJson& doc, int indent) {
  return doc.dump(indent, ' ', false, Json::error_handler_t::replace) + "\n";
}

Json parse(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte counts from 1; e.what() is "[json.exception.parse_error.101] parse error at line 1,
    // column 9: ...", where the part after the id names what was wrong.
    std::string what = e.what();
    size_t cut = what.find("] ");
    throw InvalidArgument(detail::concat("invalid JSON at byte ", e.byte > 0 ? e.byte - 1 : 0, ": ",
                                         cut == std::string::npos ? what : what.substr(cut + 2)));
  } catch (const Json::exception& e) {
    throw InvalidArgument(detail::concat("invalid JSON: ", e.what()));
  }
}

const Json& member(const Json& obj, std::string_view key) {
  LOCKSTEP_ENFORCE(obj.is_object(), InvalidArgument, "JSON: expected an object holding \"", key,
                   "\", found ", describe(obj));
  auto it = obj.find(key);
  LOCKSTEP_ENFORCE(it != obj.end(), InvalidArgument, "JSON: member \"", key, "\" is missing");
  return *it;
}

int64_t integer(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    LOCKSTEP_ENFORCE(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                     InvalidArgument, "JSON: member \"", key, "\" is too large: ", u);
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) wrong_type(key, "an integer", v);
  return v.get<int64_t>();
}

uint64_t unsigned_integer(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer())
    throw InvalidArgument(
        detail::concat("JSON: member \"", key, "\" must not be negative, found ", v.dump()));
  wrong_type(key, "a non-negative integer", v);
}

int int32(const Json& obj, std::string_view key) {
  int64_t v = integer(obj, key);
  LOCKSTEP_ENFORCE(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
                   InvalidArgument, "JSON: member \"", key, "\" is out of range: ", v);
  return static_cast<int>(v);
}

const std::string& string(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (!v.is_string()) wrong_type(key, "a string", v);
  return v.get_ref<const std::string&>();
}

const Json::array_t& array(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (!v.is_array()) wrong_type(key, "an array", v);
  return v.get_ref<const Json::array_t&>();
}

}  // namespace lockstep::debug::json
