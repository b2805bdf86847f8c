// run_launcher: the whole of `lockstep run` once the options are parsed and checked. Starts the
// guardian, catches signals, hosts or joins the store, and runs attempts until one succeeds or
// --max-restarts is spent; prints the summary. Main thread only; one per process.
#pragma once

#include "launcher/options.h"

namespace lockstep::launcher {

// Returns the process exit code: 0, the root cause's exit code (128 + signal for a signal), the
// failed node's code for a failure on another node, or 128 + signal when the launcher was
// interrupted. Throws Error for failures outside the ranks (the store's port is taken, a
// rendezvous timed out), after stopping every rank it started.
int run_launcher(const LaunchOptions& options);

}  // namespace lockstep::launcher
