// The MASTER_PORT that the store's host picks for each attempt (see pick_free_port).
#pragma once

namespace lockstep::launcher {

// A port that is free on this host now, for the script's own store, from below the kernel's
// ephemeral range (see free_port.cc).
int pick_free_port();

}  // namespace lockstep::launcher
