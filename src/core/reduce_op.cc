#include "lockstep/core/reduce_op.h"

#include <array>
#include <cctype>
#include <string>

#include "lockstep/core/error.h"

namespace lockstep {
namespace {

struct ReduceOpAlias {
  std::string_view name;
  ReduceOp op;
};

// Every spelling parse_reduce_op accepts; the first entry per op is what reduce_op_name prints.
constexpr std::array<ReduceOpAlias, 14> kReduceOpAliases{{
    {"sum", ReduceOp::sum},
    {"avg", ReduceOp::avg},
    {"mean", ReduceOp::avg},
    {"average", ReduceOp::avg},
    {"prod", ReduceOp::prod},
    {"product", ReduceOp::prod},
    {"min", ReduceOp::min},
    {"max", ReduceOp::max},
    {"band", ReduceOp::band},
    {"bitwise_and", ReduceOp::band},
    {"bor", ReduceOp::bor},
    {"bitwise_or", ReduceOp::bor},
    {"bxor", ReduceOp::bxor},
    {"bitwise_xor", ReduceOp::bxor},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::band:
      return "band";
    case ReduceOp::bor:
      return "bor";
    case ReduceOp::bxor:
      return "bxor";
  }
  return "unknown-reduce-op";
}

ReduceOp parse_reduce_op(std::string_view name) {
  const std::string key = lower(name);
  for (const auto& alias : kReduceOpAliases)
    if (alias.name == key) return alias.op;
  std::string accepted;
  for (const auto& alias : kReduceOpAliases) {
    if (!accepted.empty()) accepted += ", ";
    accepted += alias.name;
  }
  throw InvalidArgument(detail::concat("unknown reduce op \"", name, "\"; use one of: ", accepted,
                                       " (case does not matter)"));
}

}  // namespace lockstep
