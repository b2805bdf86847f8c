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

namespace {

std::string renumber(std::string_view message, const std::vector<int>& members) {
  constexpr std::string_view kRank = "rank ";
  std::string out;
  size_t i = 0;
  const size_t stop = message.size();
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
  return out;
}

}  // namespace

std::string to_group_ranks(std::string_view message, const std::vector<int>& members) {
  const size_t outside = message.find(kOutsideHost);
  if (outside == std::string_view::npos) return renumber(message, members);
  size_t relay = message.rfind(kRelayMark);
  if (relay == std::string_view::npos || relay < outside) relay = message.size();
  return renumber(message.substr(0, outside), members) +
         std::string(message.substr(outside, relay - outside)) +
         renumber(message.substr(relay), members);
}

void rethrow_with_group_ranks(const std::exception& e, const std::string& context,
                              const std::vector<int>& members) {
  const ErrorClass error_class = error_class_of(e);
  if (error_class == ErrorClass::other) throw;
  const std::string_view what = e.what();
  if (const size_t outside = what.find(kOutsideHost); outside != std::string_view::npos) {
    const std::string_view reason = what.substr(outside + kOutsideHost.size());
    const size_t relay = std::min(reason.rfind(kRelayMark), reason.size());
    throw_as(error_class,
             std::string(reason.substr(0, relay)) + renumber(reason.substr(relay), members));
  }
  throw_as(error_class, context + to_group_ranks(what, members));
}

}  // namespace lockstep::hier
