// The flight-recorder dump a rank of a test job left in its trace folder (docs/diagnostics.md).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "debug/flight_recorder_dump.h"

namespace lockstep::testing {

// The dump of group `group`'s rank `rank` in dir ("<group>-rank<r>-pid<p>-..."); a test failure
// and an empty dump when there is none.
inline debug::Dump read_dump(const std::filesystem::path& dir, int rank,
                             const std::string& group = "default") {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(group + "-rank" + std::to_string(rank) + "-pid", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    return debug::dump_from_json(text.str(), name);
  }
  ADD_FAILURE() << "no dump of rank " << rank << " of group '" << group << "' in " << dir;
  return {};
}

}  // namespace lockstep::testing
