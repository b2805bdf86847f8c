// [Loopback congestion control] A connection between two processes of one host should not be
// paced.
//
// BBR (a common host default, net.ipv4.tcp_congestion_control) paces every connection at its
// estimate of the path's bandwidth and keeps about two bandwidth-delay products in flight. Over
// loopback the delay is microseconds, so the window stays at 14-26 segments (1-1.7 MiB at
// loopback's 64 KiB MSS, measured with `ss -ti`): every message larger than that waits for
// acknowledgements from a receiver that is busy or asleep. For a 2-rank all_reduce this was a
// cliff from 1 MiB on (busbw 2.3 GB/s at 512 KiB, about 1 GB/s from 1 MiB to 8 MiB; cubic on the
// same sockets ran 1-8 MiB 2-2.5x faster; docs/algorithms.md). Loss-based congestion control
// (cubic, reno) opens the window as fast as loopback acknowledges and does not pace.
#pragma once

namespace lockstep::net {

// For a connected TCP socket whose peer is on this host (a loopback address, or the socket's own
// local address) and whose congestion control paces (bbr*): switches it to cubic, or to reno
// (which every user may choose) where cubic is not allowed. Best effort; never throws.
void unpace_local_connection(int fd);

}  // namespace lockstep::net
