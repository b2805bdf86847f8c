// The p2p engine's frame header (src/p2p/frames.h): check_frame, which every header read from a
// peer's stream passes before the engine acts on it (src/p2p/engine_inbound.cc), then what the
// engine does with a header that passed: name its kind and dtype for errors, and, for a message
// no recv has claimed yet, set aside room for its payload (an eager frame's `bytes`).
//
// Input: the header's 40 bytes as they come off the stream, then the peer's rank (4 bytes).
// Checked: a header check_frame refuses is a NetworkError, and one it passes never makes the
// engine set aside more than a small message's room or read more than a text's bytes.
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "lockstep/core/dtype.h"
#include "lockstep/core/error.h"
#include "p2p/engine.h"
#include "p2p/frames.h"

using namespace lockstep;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(p2p::FrameHeader)) return 0;
  p2p::FrameHeader h;
  std::memcpy(&h, data, sizeof h);  // as Engine::State::read_in fills it
  int peer = 1;
  if (size >= sizeof h + sizeof peer) std::memcpy(&peer, data + sizeof h, sizeof peer);
  try {
    p2p::check_frame(h, peer);
  } catch (const NetworkError&) {
    return 0;
  }
  (void)p2p::frame_kind_name(h.kind);
  (void)dtype_name(static_cast<DType>(h.dtype));  // Engine::State::mismatch_text
  if (h.kind == p2p::FrameKind::eager) {
    // Engine::State::on_message keeps an unclaimed eager message aside: room for h.bytes. The
    // engine sends larger messages as rts, so a bigger eager frame is a corrupt stream.
    if (h.bytes > p2p::kEagerBytes)
      fuzz::broken(detail::concat("check_frame passed an eager frame of ", h.bytes,
                                  " bytes, which the engine would set aside room for"));
    std::vector<std::byte> room(h.bytes);
  }
  return 0;
}
