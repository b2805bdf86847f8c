#include "backends/hier/rank_names.h"

#include <algorithm>
#include <cctype>

#include "comm/failure.h"
#include "lockstep/core/error.h"

namespace lockstep::hier {

namespace {

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

std::string to_group_ranks(std::string_view message, const std::vector<int>& members) {
  constexpr std::string_view kRank = "rank ";
  const size_t stop = std::min(message.find(kOutsideHost), message.size());
  std::string out;
  size_t i = 0;
  while (i < stop) {
    const bool starts_word = i == 0 || !is_word_char(message[i - 1]);
    if (!starts_word || message.substr(i, kRank.size()) != kRank) {
      out += message[i++];
      continue;
    }
    size_t digits = i + kRank.size(), end = digits;
    while (end < stop && std::isdigit(static_cast<unsigned char>(message[end])) != 0) ++end;
    out += kRank;
    const bool whole_number =
        end > digits && end - digits < 9 && (end == message.size() || !is_word_char(message[end]));
    size_t local = whole_number ? std::stoul(std::string(message.substr(digits, end - digits))) : 0;
    if (whole_number && local < members.size())
      out += std::to_string(members[local]);
    else
      out += message.substr(digits, end - digits);
    i = end;
  }
  out += message.substr(stop);
  return out;
}

void rethrow_with_group_ranks(const std::exception& e, const std::string& context,
                              const std::vector<int>& members) {
  const ErrorClass error_class = error_class_of(e);
  if (error_class == ErrorClass::other) throw;
  throw_as(error_class, context + to_group_ranks(e.what(), members));
}

}  // namespace lockstep::hier
