// The decisions of `lockstep doctor`'s multi-node checks, apart from any socket or store, so that
// tests can feed them what a resolver or a clock would return: how many nodes the job has, whether
// a host name's loopback address is a problem, and a peer's clock skew from one store round trip.
#pragma once

#include <arpa/inet.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/doctor_checks.h"
#include "lockstep/core/error.h"

namespace lockstep::cli::doctor {

// A check's outcome, as the Report prints it.
struct Verdict {
  Status status = Status::ok;
  std::string text;
  std::string fix;
};

inline void add(const std::string& topic, const Verdict& v, Report& report) {
  if (v.status == Status::ok)
    report.ok(topic, v.text);
  else if (v.status == Status::note)
    report.note(topic, v.text, v.fix);
  else
    report.problem(topic, v.text, v.fix);
}

// The job's nodes and this process's node: GROUP_WORLD_SIZE / GROUP_RANK (lockstep run and
// torchrun set them), else WORLD_SIZE / LOCAL_WORLD_SIZE ranks per node, else one rank per node
// (init_process_group's own assumption without LOCAL_WORLD_SIZE). Unset values are negative.
struct NodeShape {
  int nodes = 1;
  int node_rank = 0;
};

inline NodeShape node_shape(int group_world_size, int group_rank, int world_size, int rank,
                            int local_world_size) {
  if (group_world_size > 0)
    return {group_world_size, group_rank >= 0 && group_rank < group_world_size ? group_rank : 0};
  const int per_node = local_world_size > 0 ? local_world_size : 1;
  const int ranks = world_size > 0 ? world_size : 1;
  return {(ranks + per_node - 1) / per_node, rank > 0 ? rank / per_node : 0};
}

// Whether an IP address (text, IPv4 or IPv6, "[...]" allowed) is a loopback address: 127.0.0.0/8,
// ::1, or ::ffff:127.x.y.z. A host name is not an address: false.
inline bool is_loopback(std::string address) {
  if (address.size() > 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

// Whether a master address names this machine only ("localhost", or a loopback address), so that
// every node of the job runs here.
inline bool names_this_machine_only(const std::string& master) {
  return master == "localhost" || master == "localhost.localdomain" || is_loopback(master);
}

// This host's name resolved to `address`. With several nodes, a loopback address is the classic
// cause of "connection refused" between nodes (Debian maps the host name to 127.0.1.1): whatever
// advertises the name (Gloo, MPI, a rank falling back to its host name) sends the other nodes to
// themselves. Not when the master is a loopback address: then every node is on this machine.
inline Verdict hostname_verdict(const std::string& name, const std::string& address, int nodes,
                                bool master_is_loopback) {
  using detail::concat;
  const std::string found = concat("'", name, "' resolves to ", address);
  if (!is_loopback(address)) return {Status::ok, found, {}};
  if (nodes <= 1) return {Status::ok, found + " (loopback: fine for a job on one node)", {}};
  if (master_is_loopback)
    return {Status::ok,
            concat(found, " (loopback: fine here, the master address is loopback too, so all ",
                   nodes, " nodes run on this machine)"),
            {}};
  return {Status::problem,
          concat(found, ", a loopback address, in a ", nodes,
                 "-node job: a peer told this name (Gloo, MPI, a rank that falls back to its host "
                 "name) connects to its own host and gets 'connection refused'"),
          concat("map '", name,
                 "' to this host's routable address in /etc/hosts (Debian's installer maps it "
                 "to 127.0.1.1), and advertise a routable address: LOCKSTEP_SOCKET_ADDR=<this "
                 "host's IP>, and lockstep run --master-addr <node 0's IP>")};
}

// A peer's wall clock read once during a store round trip that began at `before_ns` and ended at
// `after_ns` on this host's wall clock: the reading happened near the middle, so the skew is the
// reading minus the midpoint, give or take half the round trip.
struct Skew {
  double seconds = 0;      // peer's clock minus this host's: positive when the peer is ahead
  double uncertainty = 0;  // half the round trip, in seconds
};

inline Skew clock_skew(int64_t before_ns, int64_t remote_ns, int64_t after_ns) {
  const double mid = (static_cast<double>(before_ns) + static_cast<double>(after_ns)) / 2;
  return {(static_cast<double>(remote_ns) - mid) / 1e9,
          std::fabs(static_cast<double>(after_ns - before_ns)) / 2e9};
}

// "+1.234 s" with a sign.
inline std::string seconds_text(double s) {
  if (std::fabs(s) < 0.0005) s = 0;  // no "-0.000 s"
  char text[32];
  std::snprintf(text, sizeof text, "%+.3f s", s);
  return text;
}

// Skew beyond `limit_s` even after the round trip's uncertainty is a problem; beyond it only
// within the uncertainty (a slow store round trip), a note; else ok. `who` names the peer.
inline Verdict skew_verdict(const std::string& who, const Skew& skew, double limit_s) {
  using detail::concat;
  char rtt[32];
  std::snprintf(rtt, sizeof rtt, "%.1f ms", skew.uncertainty * 2e3);
  const std::string found = concat(who, "'s clock is ", seconds_text(skew.seconds),
                                   " from node 0's (store round trip ", rtt, ")");
  const double size = std::fabs(skew.seconds);
  if (size <= limit_s) return {Status::ok, found, {}};
  if (size - skew.uncertainty <= limit_s)
    return {Status::note,
            concat(found, ": maybe more than ", limit_s,
                   " s apart, the round trip "
                   "was too slow to tell"),
            {}};
  return {Status::problem,
          concat(found, ": more than ", limit_s,
                 " s apart, so times in logs and the launchers' summaries do not line up across "
                 "nodes"),
          "synchronise the clocks (chrony or systemd-timesyncd on every node; `timedatectl` "
          "and `chronyc tracking` show the state)"};
}

}  // namespace lockstep::cli::doctor
