// Engine: a group's point-to-point messages, with progress independent of the caller and of the
// group's collectives.
//
// [Independent progress] Sends and recvs never wait in a queue behind each other or behind a
// collective: post() starts them at once, and a thread of the engine's own moves every pending
// message of every peer, in both directions, whenever its Channel has bytes or room. So a rank
// may post a recv, then a send, then wait for both (the halo exchange), and a pending recv never
// delays a collective of the same group, nor the reverse.
//
// [Matching] A message matches the first recv (in post order) from its source, or from any
// source, with its tag; a recv posted later matches the first such message that arrived (in
// arrival order). Sends of one rank to another are framed in post order, so messages between one
// pair with one tag never overtake each other (MPI's rule). A matched pair must agree on the
// size and dtype: otherwise both ops fail with a MismatchError naming both.
//
// [Protocols] Messages up to kEagerBytes go eagerly (frames.h): the send completes once the bytes
// are in the channel, and a message no recv wants yet is kept aside (copied) until one does.
// Larger messages announce themselves (rts); their bytes go out once a recv has matched (cts),
// straight from the send's buffer into the recv's, streamed through the channel: no message is
// ever staged whole, whatever its size.
//
// [Deadlines and diagnoses] Every post has a deadline. At the deadline its unfinished ops are
// detached (nothing can complete them any more), the engine asks each peer involved what it is
// doing with this rank (query/reply frames, answered by the peer's engine thread even while its
// caller is blocked elsewhere), and after the answers (or a second) fails the post with a
// TimeoutError that says what both sides wait for: both receiving first, a tag mismatch, or a peer
// that posted nothing for this rank.
//
// [Leaving] close() fails what is pending, and tells the peers why this rank leaves (an orderly
// destruction, an abort, an exception unwinding the caller's stack), so that their ops with it
// fail at once with that reason instead of waiting.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/group_config.h"
#include "comm/op_journal.h"
#include "comm/work_access.h"
#include "lockstep/comm/work.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/dtype.h"
#include "p2p/channel.h"
#include "p2p/frames.h"  // kEagerBytes

namespace lockstep::p2p {

inline constexpr int kAnySource = -1;

// One send or recv of a post.
struct Request {
  bool is_send = true;
  int peer = 0;  // recv: kAnySource for a recv from any rank
  uint32_t tag = 0;
  DType dtype = DType::u8;
  size_t count = 0;
  const void* input = nullptr;     // send
  void* output = nullptr;          // recv
  uint64_t seq = 0;                // its number among the group's sends to (recvs from) the peer
  uint64_t record_id = kNoRecord;  // its entry in the group's OpJournal
  Clock::time_point posted{};      // coarse: when the front door took it (its journal entry's)
};

// "send #3 to rank 1", "recv #0 from any rank": the request as errors name it (built only when
// needed: not on the fast path).
std::string name_of(const Request& r);
// "recv #0 from rank 1 (tag 0, f32 x 4096)": a request as Works and errors name it.
std::string describe(const Request& r);

class Engine {
 public:
  // journal (may be null): told the end of every request that has a record_id.
  Engine(std::unique_ptr<Channel> channel, const GroupConfig& config, OpJournal* journal = nullptr);
  // Closes (as an orderly destruction) if close() was not called.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts every request at once; the Work completes when all have, with the first error. A post
  // of a single recv from any source reports its source through Work::source_rank().
  WorkPtr post(std::span<Request> requests, Deadline deadline, detail::Description description);

  // Leaves: ops still pending fail with `why_here`; peers get a bye saying `why_for_peers`; what
  // is already written reaches them (lingering at most until `linger`). The peers listed in
  // `unreachable` (their host stopped answering the group's collectives) get no bye: a bye that
  // must first connect to them would only hold the close until `linger`. Idempotent.
  void close(const std::string& why_here, const std::string& why_for_peers, Deadline linger,
             std::span<const int> unreachable = {});

  struct State;  // src/p2p/engine_state.h

 private:
  std::shared_ptr<State> state_;  // shared with waiters that drive progress (engine_state.h)
};

}  // namespace lockstep::p2p
