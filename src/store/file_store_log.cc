#include "store/file_store_log.h"

#include <cstring>

#include "lockstep/core/error.h"

namespace lockstep::store_detail {

namespace {

constexpr std::string_view kMagic = "LKSTFS01";

void put_le(std::string& out, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view bytes, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

void apply_set(ReplayedLog& log, std::string key, std::string_view value) {
  auto [it, inserted] = log.data.try_emplace(std::move(key));
  if (!inserted) log.live_bytes -= set_record_bytes(it->first.size(), it->second.size());
  it->second.assign(value);
  log.live_bytes += set_record_bytes(it->first.size(), it->second.size());
}

void apply_delete(ReplayedLog& log, const std::string& key) {
  auto it = log.data.find(key);
  if (it == log.data.end()) return;
  log.live_bytes -= set_record_bytes(it->first.size(), it->second.size());
  log.data.erase(it);
}

}  // namespace

std::string encode_file_header(const FileHeader& h) {
  std::string out(kMagic);
  put_le(out, h.generation, 8);
  put_le(out, static_cast<uint64_t>(h.finished_users), 8);
  put_le(out, 0, 8);
  return out;
}

bool decode_file_header(std::string_view bytes, FileHeader* h) {
  if (bytes.size() < kFileHeaderBytes || bytes.substr(0, kMagic.size()) != kMagic) return false;
  h->generation = get_le(bytes, 8, 8);
  h->finished_users = static_cast<int64_t>(get_le(bytes, 16, 8));
  return true;
}

size_t set_record_bytes(size_t key_size, size_t value_size) {
  return 1 + 4 + key_size + 8 + value_size;
}

void append_set_record(std::string& out, std::string_view key, std::string_view value) {
  out.push_back('S');
  put_le(out, key.size(), 4);
  out.append(key);
  put_le(out, value.size(), 8);
  out.append(value);
}

void append_delete_record(std::string& out, std::string_view key) {
  out.push_back('D');
  put_le(out, key.size(), 4);
  out.append(key);
}

size_t replay_records(std::string_view bytes, ReplayedLog& log, const std::string& path) {
  size_t at = 0;
  for (;;) {
    if (bytes.size() - at < 5) return at;
    char kind = bytes[at];
    if (kind != 'S' && kind != 'D')
      throw StoreError(detail::concat("FileStore file ", path, " is corrupt (record of kind ",
                                      int(kind), " at byte ", at + kFileHeaderBytes,
                                      "); delete it and restart the job"));
    size_t key_size = get_le(bytes, at + 1, 4);
    size_t key_at = at + 5;
    if (bytes.size() - key_at < key_size) return at;
    std::string key(bytes.substr(key_at, key_size));
    if (kind == 'D') {
      apply_delete(log, key);
      at = key_at + key_size;
      continue;
    }
    size_t len_at = key_at + key_size;
    if (bytes.size() - len_at < 8) return at;
    uint64_t value_size = get_le(bytes, len_at, 8);
    if (bytes.size() - len_at - 8 < value_size) return at;
    apply_set(log, std::move(key), bytes.substr(len_at + 8, value_size));
    at = len_at + 8 + value_size;
  }
}

}  // namespace lockstep::store_detail
