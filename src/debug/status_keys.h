// Per-rank status keys: each rank's progress through its group's collectives, kept in the job's
// store so that any rank can see where the others are even when the data path is stuck.
//
// Key "<group>/status/<rank>", value "<entered> <started> <completed>" (decimal counts of
// collectives, see debug::Progress), then " <kind> <seq>" of the collective the rank runs now, if
// any: ranks that all entered op #N but are in different collectives there are told apart. The
// watchdog publishes a rank's own key when its progress has changed (a few times a second at most,
// never on the op path); a rank about to report a timeout publishes first, then reads everyone's.
//
// [Blame keys] A rank whose collective timed out while some ranks never entered it records whom
// it waited for, so that the launcher can name the culprit rather than the first rank to give up:
// key "lockstep/blame/<global rank of the reporter>", value "<global ranks, space-separated>\t<op
// summary>". The launcher reads them under the attempt's prefix of its store.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "debug/flight_recorder.h"
#include "lockstep/store/store.h"

namespace lockstep::debug {

// A rank's progress and the collective it runs now.
struct RankStatus : Progress {
  RankStatus() = default;
  RankStatus(const Progress& p, std::string kind = "", uint64_t seq = 0)  // NOLINT: implicit
      : Progress(p), op_kind(std::move(kind)), op_seq(seq) {}
  std::string op_kind;  // "all_reduce", "broadcast", ... ("" when none)
  uint64_t op_seq = 0;
};
using RankStatuses = std::vector<std::optional<RankStatus>>;  // index: rank; nullopt: unknown

std::string status_key(const std::string& group, int rank);
void publish_status(Store& store, const std::string& group, int rank, const RankStatus& status);
// Every rank's status; nullopt for a rank without a (well-formed) key. Waits at most `wait` for
// keys not yet written. Store failures other than timeouts propagate.
RankStatuses read_statuses(Store& store, const std::string& group, int size,
                           std::chrono::milliseconds wait);

// Ranks that never entered collective `seq` (their entered count is at most seq).
std::vector<int> ranks_not_entered(const RankStatuses& statuses, uint64_t seq);
// "[0, 3]"
std::string rank_list(const std::vector<int>& ranks);
// "ranks [3] never entered it (rank 3 is in broadcast #55); last completed: rank 0 #56, rank 1
// #56, rank 2 #56, rank 3 #55" (or "every rank entered it; ...", or, when the ranks run different
// collectives as #seq, "every rank entered #57, but not the same collective: rank 1 is in
// broadcast #57, ranks [0, 2] in all_reduce #57 (...)"). "none" for a rank that completed nothing
// yet, "unknown" for one without a status key.
std::string describe_statuses(const RankStatuses& statuses, uint64_t seq);

struct Blame {
  int reporter = 0;           // global rank that timed out
  std::vector<int> culprits;  // global ranks that never entered the op
  std::string op;             // the op's summary
};

std::string blame_key(int reporter_global_rank);
void publish_blame(Store& store, const Blame& blame);
// The blames of global ranks [0, world_size) found in store (no waiting); malformed ones are
// skipped. Store failures propagate.
std::vector<Blame> read_blames(Store& store, int world_size);

}  // namespace lockstep::debug
