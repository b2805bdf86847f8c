// The culprit of a hang, from the ranks' own diagnoses: a rank whose collective timed out names
// the ranks that never entered it in a blame key of the job's store (src/debug/status_keys.h,
// [Blame keys]). The launcher reads them after a failed attempt, so that its summary leads with
// the rank that stalled rather than the first rank to give up waiting for it.
#pragma once

#include <optional>
#include <string>

#include "launcher/attempt.h"

namespace lockstep {
class TcpStore;
}

namespace lockstep::launcher {

// The blames of one attempt (keys under its attempt_prefix, src/group/attempt_scope.h): the
// ranks blamed, minus those that reported a timeout themselves, and the reporters.
// nullopt when no rank blamed another, or the store cannot be read (best effort, never throws).
std::optional<Culprit> read_culprit(TcpStore& store, const std::string& run_id, int attempt,
                                    int world_size);

}  // namespace lockstep::launcher
