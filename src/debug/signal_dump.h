// [Dump on SIGTERM] A rank that is stopped with SIGTERM (as `lockstep run` stops the other ranks
// after one failed) writes the flight-recorder dump of every live group before it dies, so that
// `lockstep trace` has every rank's last ops, the stalled rank's included.
//
// Signal-safe by construction: the handler only write(2)s the signal number to a pipe. A thread
// started with the first registration reads it, writes the dumps (ordinary code, off the
// handler), then restores the default action and re-sends the signal, so the process still ends
// "killed by SIGTERM". The handler is installed only when SIGTERM has its default action: a
// program with its own handler (or one that ignores SIGTERM) keeps it, and gets no dump. A
// process forked without exec does not dump its parent's groups.
#pragma once

namespace lockstep::debug {

class Watchdog;

// A group's watchdog is registered while it lives (Watchdog's constructor and destructor).
void register_signal_dump(const Watchdog* watchdog);
void unregister_signal_dump(const Watchdog* watchdog);

}  // namespace lockstep::debug
