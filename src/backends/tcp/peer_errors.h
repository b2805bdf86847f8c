// The user-facing errors of the tcp backend when a peer goes away, aborts or times out. Each
// message names the op, the peer (rank, host, pid) and what to do.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "backends/tcp/connection.h"
#include "lockstep/store/store.h"

namespace lockstep {

// The store key where the first rank to abort leaves its reason: "<group>/abort".
std::string abort_key(const std::string& group);
// Best effort: records "rank R (host h): reason" unless another rank was first. Never throws.
void write_abort_note(Store& store, const std::string& group, int rank, const std::string& host,
                      const std::string& reason);
// Best effort: the note another rank left, waiting at most `wait`. Never throws.
std::optional<std::string> read_abort_note(Store& store, const std::string& group,
                                           std::chrono::milliseconds wait);

struct PeerFailure {
  std::string op_name;  // "all_reduce #12"
  int rank = 0;         // this rank
  std::string peer;     // "rank 1 (host h, pid 123)"
  int peer_rank = -1;
  std::optional<std::string> abort_note;  // for closed / reset
};

// Throws the error for event e: NetworkError for closed / reset / goodbye / garbage; the peer's
// own class for aborted.
[[noreturn]] void throw_peer_failure(const PeerFailure& f, const PeerEvent& e);

}  // namespace lockstep
