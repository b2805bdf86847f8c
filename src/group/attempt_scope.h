// The key space of one attempt in the launcher's store: lockstep's env:// scopes every rank's
// keys under it (init.cc), and `lockstep run` reads the ranks' blame keys there
// (src/launcher/culprit.cc).
#pragma once

#include <string>

namespace lockstep {

// "<run_id>/attempt_<attempt>" (LOCKSTEP_RUN_ID, LOCKSTEP_RESTART_COUNT).
std::string attempt_prefix(const std::string& run_id, const std::string& attempt);

}  // namespace lockstep
