#include "store/protocol.h"

#include <algorithm>
#include <cstring>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::store_proto {

namespace {

void put_le(std::string& out, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const unsigned char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

bool is_value_slot(Command c, size_t index) {
  switch (c) {
    case Command::set:
      return index == 1;
    case Command::compare_set:
      return index >= 1;
    case Command::multi_set:
      return index % 2 == 1;
    default:
      return false;
  }
}

}  // namespace

std::string handshake_bytes() {
  std::string out;
  put_le(out, kMagic, 4);
  put_le(out, kProtocolVersion, 4);
  return out;
}

uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void put_u32(std::string& out, uint32_t v) {
  put_le(out, v, 4);
}

void encode(const Message& m, std::string& out) {
  size_t total = kHeaderBytes;
  for (const auto& s : m.strings) total += 8 + s.size();
  out.reserve(out.size() + total);
  out.push_back(static_cast<char>(m.code));
  put_le(out, static_cast<uint64_t>(m.number), 8);
  put_le(out, m.strings.size(), 4);
  for (const auto& s : m.strings) {
    put_le(out, s.size(), 8);
    out.append(s);
  }
}

bool valid_request_shape(uint8_t code, uint32_t count) {
  switch (static_cast<Command>(code)) {
    case Command::get:
    case Command::add:
    case Command::delete_key:
      return count == 1;
    case Command::set:
      return count == 2;
    case Command::compare_set:
      return count == 3;
    case Command::num_keys:
      return count == 0;
    case Command::check:
    case Command::wait:
    case Command::multi_get:
      return count <= kMaxKeysPerRequest;
    case Command::multi_set:
      return count % 2 == 0 && count <= kMaxStringsPerMessage;
  }
  return false;
}

const char* command_name(uint8_t code) {
  constexpr const char* kNames[] = {"?",           "set",       "get",      "add",
                                    "compare_set", "check",     "wait",     "delete_key",
                                    "num_keys",    "multi_get", "multi_set"};
  return code < std::size(kNames) ? kNames[code] : "?";
}

bool MessageParser::fill_fixed(const char** p, const char* end, size_t want) {
  size_t take = std::min(want - have_, static_cast<size_t>(end - *p));
  std::memcpy(fixed_ + have_, *p, take);
  *p += take;
  have_ += take;
  return have_ == want;
}

size_t MessageParser::bound(size_t index) const {
  if (direction_ == Direction::reply) return kMaxValueBytes;
  return is_value_slot(static_cast<Command>(message_.code), index) ? kMaxValueBytes : kMaxKeyBytes;
}

MessageParser::Result MessageParser::fail(std::string why) {
  error_ = std::move(why);
  return Result::invalid;
}

MessageParser::Result MessageParser::on_header() {
  message_.code = fixed_[0];
  message_.number = static_cast<int64_t>(get_le(fixed_ + 1, 8));
  count_ = static_cast<uint32_t>(get_le(fixed_ + 9, 4));
  have_ = 0;
  if (direction_ == Direction::request && !valid_request_shape(message_.code, count_))
    return fail(detail::concat("malformed request: command ", int(message_.code), " (",
                               command_name(message_.code), ") with ", count_, " strings"));
  if (count_ > kMaxStringsPerMessage)
    return fail(
        detail::concat("message carries ", count_, " strings (limit ", kMaxStringsPerMessage, ")"));
  message_.strings.reserve(std::min<uint32_t>(count_, 1024));
  return next_string_or_done();
}

MessageParser::Result MessageParser::next_string_or_done() {
  if (message_.strings.size() == count_) {
    state_ = State::header;
    return Result::complete;
  }
  state_ = State::length;
  return Result::need_more;
}

MessageParser::Result MessageParser::on_length() {
  uint64_t length = get_le(fixed_, 8);
  have_ = 0;
  size_t index = message_.strings.size();
  if (length > bound(index)) {
    // Refused on the length alone: nothing of it has been read or allocated.
    if (direction_ == Direction::reply)
      return fail(detail::concat("string ", index, " of the reply announces ", length,
                                 " bytes, over the limit of ", kMaxValueBytes,
                                 " bytes (kMaxValueBytes)"));
    const bool value = is_value_slot(static_cast<Command>(message_.code), index);
    return fail(detail::concat("a ", command_name(message_.code), " request announces a ",
                               value ? "value" : "key", " of ", length,
                               " bytes, over the store's limit of ", bound(index), " bytes (",
                               value ? "kMaxValueBytes" : "kMaxKeyBytes",
                               "); refused before reading or allocating any of it"));
  }
  constexpr uint64_t kReserveCap = 1 << 20;  // grow with the data beyond this
  message_.strings.emplace_back().reserve(std::min(length, kReserveCap));
  body_left_ = length;
  state_ = State::body;
  return length == 0 ? next_string_or_done() : Result::need_more;
}

MessageParser::Result MessageParser::feed(const char** p, const char* end) {
  while (*p < end) {
    Result r = Result::need_more;
    if (state_ == State::header) {
      if (!fill_fixed(p, end, kHeaderBytes)) return Result::need_more;
      r = on_header();
    } else if (state_ == State::length) {
      if (!fill_fixed(p, end, 8)) return Result::need_more;
      r = on_length();
    } else {
      size_t take = static_cast<size_t>(std::min<uint64_t>(body_left_, end - *p));
      message_.strings.back().append(*p, take);
      *p += take;
      body_left_ -= take;
      if (body_left_ == 0) r = next_string_or_done();
    }
    if (r != Result::need_more) return r;
  }
  return Result::need_more;
}

Message MessageParser::take() {
  Message out = std::move(message_);
  message_ = Message{};
  return out;
}

}  // namespace lockstep::store_proto
