// The on-disk format of a FileStore file: a fixed header, then an append-only log of records.
//
//   header:  "LKSTFS01" | u64 generation | i64 finished_users | u64 reserved      (32 bytes)
//   record:  'S' | u32 key length | key | u64 value length | value               (set)
//            'D' | u32 key length | key                                          (delete)
// All integers little-endian. Replaying the records in order gives the current contents.
// Compaction rewrites the file in place as one 'S' record per live key and bumps generation, so
// a reader whose cached generation differs replays the file from the start. finished_users counts
// FileStore objects destroyed so far (the last of world_size removes the file).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace lockstep::store_detail {

inline constexpr size_t kFileHeaderBytes = 32;

struct FileHeader {
  uint64_t generation = 1;
  int64_t finished_users = 0;
};

// Encodes header; decodes it (false if the magic is wrong).
std::string encode_file_header(const FileHeader& h);
bool decode_file_header(std::string_view bytes, FileHeader* h);

void append_set_record(std::string& out, std::string_view key, std::string_view value);
void append_delete_record(std::string& out, std::string_view key);
// Bytes a set record of this key and value takes.
size_t set_record_bytes(size_t key_size, size_t value_size);

// A key-value map rebuilt from records, tracking the bytes its compacted form would take.
struct ReplayedLog {
  std::unordered_map<std::string, std::string> data;
  size_t live_bytes = 0;
};

// Applies the complete records at the start of bytes to log and returns how many bytes they
// took; a truncated record at the end is left unparsed. Throws StoreError (naming path) on a
// record of unknown kind.
size_t replay_records(std::string_view bytes, ReplayedLog& log, const std::string& path);

}  // namespace lockstep::store_detail
