// Rank names in errors of the intra-host stage. The shm backend of a host's ranks numbers them
// 0..k-1 on that host; a user reads ranks of the whole group. to_group_ranks rewrites every
// "rank <i>" of a host-group message as "rank <members[i]>".
//
// [Outside this host] Reasons that the hierarchical backend hands to its host group (the cause of
// a failure elsewhere, already in whole-group ranks) start with kOutsideHost. Rewriting stops
// there, so that such a reason is never renumbered twice, and resumes at the relay the host
// group added to it ([Relays] in comm/failure.h), which names ranks of the host.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::hier {

inline constexpr std::string_view kOutsideHost = "outside this host: ";

// message with "rank <i>" (i < members.size()) replaced by "rank <members[i]>", except between
// the first kOutsideHost and the relay after it.
std::string to_group_ranks(std::string_view message, const std::vector<int>& members);

// Rethrows e (the exception being handled) as context + its renumbered message, keeping its type
// for the classes peers propagate (network, mismatch, timeout); any other exception unchanged.
// A failure from outside the host is rethrown as its reason and the host's relay alone: the
// cause leads, once.
[[noreturn]] void rethrow_with_group_ranks(const std::exception& e, const std::string& context,
                                           const std::vector<int>& members);

}  // namespace lockstep::hier
