// The user-facing errors of the tcp backend when a peer goes away, aborts or times out. Each
// message names the op, the peer (rank, host, pid) and what to do.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/tcp/connection.h"
#include "comm/failure.h"

namespace lockstep::tcp {

struct PeerFailure {
  std::string op_name;  // "all_reduce #12"
  int rank = 0;         // this rank
  std::string peer;     // "rank 1 (host h, pid 123)"
  int peer_rank = -1;
  std::string peer_host;                  // its host name
  std::vector<int> peer_host_ranks;       // every rank of the group on that host
  std::optional<std::string> abort_note;  // for closed / reset
};

// Throws the error for event e: NetworkError for closed / reset / goodbye / garbage; the peer's
// own class for aborted.
[[noreturn]] void throw_peer_failure(const PeerFailure& f, const PeerEvent& e);

}  // namespace lockstep::tcp
