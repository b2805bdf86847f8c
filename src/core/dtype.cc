#include "lockstep/core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "core/half_bits.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

struct DTypeAlias {
  std::string_view name;
  DType dtype;
};

// Every spelling parse_dtype accepts; the first entry per dtype is what dtype_name prints.
constexpr std::array<DTypeAlias, 23> kDTypeAliases{{
    {"f32", DType::f32},      {"float32", DType::f32},     {"float", DType::f32},
    {"f64", DType::f64},      {"float64", DType::f64},     {"double", DType::f64},
    {"f16", DType::f16},      {"float16", DType::f16},     {"half", DType::f16},
    {"bf16", DType::bf16},    {"bfloat16", DType::bf16},   {"i8", DType::i8},
    {"int8", DType::i8},      {"u8", DType::u8},           {"uint8", DType::u8},
    {"i32", DType::i32},      {"int32", DType::i32},       {"int", DType::i32},
    {"i64", DType::i64},      {"int64", DType::i64},       {"long", DType::i64},
    {"bool", DType::boolean}, {"boolean", DType::boolean},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string accepted_names() {
  std::string out;
  for (const auto& alias : kDTypeAliases) {
    if (!out.empty()) out += ", ";
    out += alias.name;
  }
  return out;
}

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i8:
      return "i8";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::boolean:
      return "bool";
  }
  return "unknown-dtype";
}

DType parse_dtype(std::string_view name) {
  const std::string key = lower(name);
  for (const auto& alias : kDTypeAliases)
    if (alias.name == key) return alias.dtype;
  throw InvalidArgument(detail::concat(
      "unknown dtype \"", name, "\"; use one of: ", accepted_names(), " (case does not matter)"));
}

uint16_t half::from_float(float f) {
  return detail::float_to_half_bits(f);
}

float half::to_float(uint16_t h) {
  return detail::half_bits_to_float(h);
}

}  // namespace lockstep
