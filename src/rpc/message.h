// Message: the encoded form of what an RPC frame carries. `body` is the codec's bytes (codec.h);
// each tensor in it refers by index to one blob, whose bytes travel after the body without being
// copied into it (frame.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace lockstep::rpc {

struct Blob {
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> owner;  // keeps data alive
};

struct Message {
  std::string body;
  std::vector<Blob> blobs;
};

// A received blob's buffer: nbytes of 64-byte aligned memory that the Blob owns.
Blob allocate_blob(size_t nbytes);

}  // namespace lockstep::rpc
