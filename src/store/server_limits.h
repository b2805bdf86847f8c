// The bounds that keep the TcpStore server serving its real clients, with bounded extra time and
// memory, while others misbehave: connect and say nothing, send a byte a second, hold thousands
// of connections open, or announce huge lengths. The bounds of the messages themselves
// (kMaxKeyBytes, kMaxValueBytes, kMaxStringsPerMessage) are in store/protocol.h.
//
// [Out of file descriptors] The server raises its process's soft limit on open files toward
// kWantedOpenFiles. When accept(2) still fails for lack of descriptors, the server drops the
// oldest connection that has not finished its handshake and accepts in its place (a real client
// finishes its handshake in one round trip, so the oldest unauthenticated connection is the most
// likely to be an abuser's), and logs this once. With no such connection to drop, it stops
// accepting for kAcceptPause, instead of spinning on a listener that stays readable; the clients
// it holds are served throughout.
#pragma once

#include <chrono>
#include <cstdint>

namespace lockstep::store_limits {

// A connection must finish its handshake (the 40-byte hello and the 32-byte proof) this soon
// after it is accepted; a real client needs one round trip. This bounds how long a client that
// connects and says nothing, or sends part of a hello a byte at a time, holds a descriptor and
// the server's memory for it.
inline constexpr std::chrono::milliseconds kHandshakeTimeout{10'000};

// Once a request's first byte has arrived, the rest must keep coming: every kTransferGrace must
// bring kMinTransferRate x kTransferGrace bytes (640 KiB) or the end of the request. A client
// sending a byte a second, or one that stops part-way, is dropped kTransferGrace after its first
// byte or its last 640 KiB step, while a 256 MiB value (kMaxValueBytes) needs only 64 KiB/s to
// get through. (A rule on the average rate since the start would let a client that sends
// megabytes at once and then stalls hold them for minutes.) A reply that the client takes too
// slowly is held to the same rule, so a client that asks for a large value and never reads it
// cannot pin the reply in memory either. Between requests, and while its blocking request is
// parked, a client may stay idle as long as it likes.
inline constexpr std::chrono::milliseconds kTransferGrace{10'000};
inline constexpr uint64_t kMinTransferRate = 64 * 1024;  // bytes per second

// The soft limit on open files the server raises its process to, when the hard limit allows:
// room for about 65,000 clients. Not the hard limit itself, which is often a million or more,
// because other code in the process may loop over every possible descriptor (closing them all
// in a child after fork, for one). `lockstep doctor` suggests the same figure.
inline constexpr uint64_t kWantedOpenFiles = 65536;

// Connections the kernel queues before the server accepts them. The usual 128 makes a burst of
// connections (thousands of ranks at start-up, or a flood) wait out SYN retries of 1 s, 3 s, ...
// once the queue is full; the kernel caps this at net.core.somaxconn.
inline constexpr int kListenBacklog = 4096;

// Out of file descriptors with no unauthenticated connection to drop: stop accepting for this
// long, rather than spin on a listener that stays readable.
inline constexpr std::chrono::milliseconds kAcceptPause{100};

// Readiness events taken per wake-up of the event loop (more wait for the next wake-up).
inline constexpr int kMaxEventsPerWait = 256;

// Connections accepted per wake-up; the rest wait in the listen queue for the next one, so that
// the clients already held are served between batches of a flood.
inline constexpr int kMaxAcceptsPerWake = 256;

}  // namespace lockstep::store_limits
