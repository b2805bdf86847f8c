// The RPC wire's frame reader (src/rpc/frame.cc): FrameReader parsing a peer's byte stream into
// frames (header, blob sizes, body, blobs), in whatever pieces the socket delivers it.
//
// Input: a byte for the piece size (fuzz_input.h's read_size: 1 to 64 bytes, or all at once), a
// byte that varies the pieces' sizes from one to the next, then the stream. Checked against a
// reference reading of the same bytes written here from frame.h's format: the reader completes
// exactly the frames the stream holds, identical (header, body, every blob's size and bytes;
// body size == header.body_bytes, blob count == header.blobs, sizes add up to
// header.blob_bytes), refuses with a CodecError exactly where the first frame breaks a rule and
// nowhere else, and says it is mid-frame exactly when bytes of a frame are left over.
//
// The reader sets aside a blob's announced size (up to kMaxBlobBytes, 16 GiB) when the blob
// begins, as it is meant to; the stream is cut short before a blob larger than kBigBlob would
// begin, so that runs stay within libFuzzer's memory limit (no input is that long anyway).
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "lockstep/rpc/errors.h"
#include "rpc/frame.h"

namespace {

using namespace lockstep::rpc;
using lockstep::fuzz::broken;

constexpr uint64_t kBigBlob = 1 << 20;

struct Expected {
  FrameHeader header;
  std::string body;
  std::vector<std::string> blobs;
};

// The frame.h format read straight through, independently of FrameReader.
struct Reference {
  std::vector<Expected> frames;
  bool refused = false;  // a frame breaks a rule within `end`
  size_t end = 0;        // how much of the stream to feed
  bool mid_frame = false;
};

uint64_t u64_at(std::string_view s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

Reference read_reference(std::string_view s) {
  Reference ref;
  ref.end = s.size();
  size_t at = 0;
  for (;;) {
    const size_t left = s.size() - at;
    ref.mid_frame = left > 0;
    if (left < sizeof(FrameHeader)) return ref;
    Expected f;
    std::memcpy(&f.header, s.data() + at, sizeof f.header);
    const FrameHeader& h = f.header;
    const int kind = static_cast<int>(h.kind);
    if (h.magic != FrameHeader::kMagic || kind < 1 || kind > 4 || h.body_bytes > kMaxBody ||
        h.blobs > kMaxBlobs || h.blob_bytes > kMaxBlobBytes ||
        (h.kind == FrameKind::goodbye && (h.body_bytes > 0 || h.blobs > 0))) {
      ref.refused = true;
      ref.end = at + sizeof h;
      return ref;
    }
    size_t p = at + sizeof h;
    if (s.size() - p < 8u * h.blobs) return ref;
    std::vector<uint64_t> sizes;
    unsigned __int128 sum = 0;
    for (int i = 0; i < h.blobs; ++i, p += 8) {
      sizes.push_back(u64_at(s, p));
      sum += sizes.back();
    }
    if (sum != h.blob_bytes) {
      ref.refused = true;
      ref.end = p;
      return ref;
    }
    // Where each blob's bytes begin: the reader allocates the blob when its previous part ends.
    size_t begin = p + h.body_bytes;
    for (uint64_t n : sizes) {
      if (n > kBigBlob && begin <= s.size()) {
        ref.end = begin - 1;  // stop one byte before the previous part is complete
        return ref;
      }
      begin += static_cast<size_t>(std::min<uint64_t>(n, s.size()));
    }
    if (s.size() - p < h.body_bytes) return ref;
    f.body.assign(s.substr(p, h.body_bytes));
    p += h.body_bytes;
    for (uint64_t n : sizes) {
      if (s.size() - p < n) return ref;
      f.blobs.emplace_back(s.substr(p, n));
      p += n;
    }
    ref.frames.push_back(std::move(f));
    at = p;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t step = lockstep::fuzz::read_size(data[0]);
  const uint8_t vary = data[1];
  const std::string_view stream = lockstep::fuzz::as_text(data + 2, size - 2);
  const Reference ref = read_reference(stream);

  FrameReader reader;
  std::vector<Frame> out;
  bool refused = false;
  try {
    for (size_t at = 0, k = 0; at < ref.end; ++k) {
      size_t n = step == 0 ? ref.end - at : (step - 1 + k * vary) % 64 + 1;
      n = std::min(n, ref.end - at);
      reader.feed(stream.data() + at, n, out);
      at += n;
    }
  } catch (const CodecError&) {
    refused = true;
  }
  if (refused != ref.refused)
    broken(refused ? "the reader refused a well-formed stream" : "the reader took a bad frame");
  if (out.size() != ref.frames.size())
    broken(lockstep::detail::concat("the reader completed ", out.size(), " frames of ",
                                    ref.frames.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const Frame& f = out[i];
    const Expected& e = ref.frames[i];
    if (std::memcmp(&f.header, &e.header, sizeof f.header) != 0) broken("a frame's header changed");
    if (f.message.body.size() != f.header.body_bytes || f.message.body != e.body)
      broken("a frame's body is not the body_bytes that followed its header");
    if (f.message.blobs.size() != f.header.blobs || f.message.blobs.size() != e.blobs.size())
      broken("a frame's blob count is not its header's");
    uint64_t total = 0;
    for (size_t b = 0; b < e.blobs.size(); ++b) {
      const Blob& blob = f.message.blobs[b];
      total += blob.nbytes;
      if (blob.nbytes != e.blobs[b].size() ||
          std::memcmp(blob.data, e.blobs[b].data(), blob.nbytes) != 0)
        broken("a blob's bytes are not those of the stream");
      if (reinterpret_cast<uintptr_t>(blob.data) % 64 != 0) broken("a blob is not 64-byte aligned");
    }
    if (total != f.header.blob_bytes) broken("a frame's blob sizes do not add up to its header's");
  }
  if (!refused && reader.mid_frame() != ref.mid_frame)
    broken(ref.mid_frame ? "the reader is not mid-frame with part of a frame read"
                         : "the reader is mid-frame at a frame boundary");
  return 0;
}
