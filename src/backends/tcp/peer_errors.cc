#include "backends/tcp/peer_errors.h"

#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::tcp {

namespace {

// A peer host that stopped answering (net.h: [Link liveness]): a partition, not a crash.
std::string unreachable_text(const PeerFailure& f, const PeerEvent& e) {
  std::string ranks;
  for (int r : f.peer_host_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return detail::concat(f.op_name, ": host ", f.peer_host, " is unreachable from rank ", f.rank,
                        ": the connection to ", f.peer, " failed: ", net::unreachable_text(e.error),
                        ". Ranks on host ", f.peer_host, ": [", ranks,
                        "]. Fix: check that host and the network toward it");
}

std::string lost_text(const PeerFailure& f, const PeerEvent& e) {
  if (e.kind == PeerEvent::reset && net::is_unreachable(e.error)) return unreachable_text(f, e);
  std::string how = e.kind == PeerEvent::reset
                        ? "the connection was reset (" + net::errno_text(e.error) + ")"
                        : "the connection closed without a goodbye";
  if (e.mid_message) how += " in the middle of a message";
  std::string s = detail::concat(f.op_name, ": lost connection to ", f.peer, ": ", how,
                                 ", so the process exited, crashed or was killed.");
  if (f.abort_note)
    s += " The group was aborted by " + *f.abort_note;
  else
    s += detail::concat(" Check rank ", f.peer_rank,
                        "'s output for its error; a SIGKILL is often the out-of-memory killer.");
  return s;
}

}  // namespace

void throw_peer_failure(const PeerFailure& f, const PeerEvent& e) {
  switch (e.kind) {
    case PeerEvent::closed:
    case PeerEvent::reset:
      throw NetworkError(lost_text(f, e));
    case PeerEvent::aborted:
      throw_as(peer_class(e.error_class), relayed(e.text, f.peer, f.rank, f.op_name));
    case PeerEvent::goodbye:
      throw NetworkError(detail::concat(
          f.peer, " shut down its process group while rank ", f.rank, " waits in ", f.op_name,
          " (ranks called different numbers of collectives?). Fix: every rank must issue the same "
          "collectives before destroying the group"));
    case PeerEvent::garbage:
      throw NetworkError(detail::concat(f.op_name, ": ", f.peer,
                                        " sent bytes that are not a lockstep frame (", e.text,
                                        "): the connection is corrupt. Restart the job"));
  }
  throw NetworkError(f.op_name + ": unknown connection event");
}

}  // namespace lockstep::tcp
