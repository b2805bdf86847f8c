// IssueOrder: LOCKSTEP_DEBUG=DETAIL's detection of a cross-group order inversion.
//
// The rule (docs/collectives.md, "The rules that keep ranks in step"): every rank issues the
// collectives of its groups in the same relative order. Rank 0 calling a->all_reduce then
// b->all_reduce while rank 1 calls b's first deadlocks when the ops run on the callers' threads
// (small ops) and happens to work when they run on the progress threads (large ones). Under
// DETAIL, no op runs inline (see FingerprintedBackend), so both ranks reach the fingerprint
// exchange of both ops, and this makes the inversion visible there whatever the size:
//
// - each group has an IssueOrder, registered in a process-wide table of live groups;
// - each thread counts the collectives it has issued on each group;
// - when a thread issues a collective on group G, note() records, for every live group H of
//   this process that shares at least two ranks with G, how many collectives this thread had
//   issued on H so far (Op::prior_issues);
// - the fingerprint exchange compares those records: every rank of G that is a member of H must
//   have issued the same number of H's collectives before G's op. A difference is an inversion,
//   named by order_inversion() with both groups and each rank's count.
//
// Counts are per thread, so a program that drives each group from its own thread (the same on
// every rank) is not flagged; one whose ranks split the groups over threads differently may be.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/op.h"

namespace lockstep::debug {

class IssueOrder {
 public:
  // Registers the group as live in this process; `global_ranks` are its members.
  IssueOrder(std::string group, std::vector<int> global_ranks);
  ~IssueOrder();  // unregisters
  IssueOrder(const IssueOrder&) = delete;
  IssueOrder& operator=(const IssueOrder&) = delete;

  // For a collective the calling thread is issuing on this group now: the prior issues on the
  // other live groups, sorted by group name. Counts the op for this thread.
  std::vector<PriorIssue> note();

 private:
  uint64_t id_;  // unique in the process (names can come back after a group is destroyed)
  std::string group_;
  std::vector<int> global_ranks_;  // sorted
};

// A compact encoding of one rank's prior issues, and its inverse (throws Error on bytes that are
// not one).
std::string encode_prior_issues(const std::vector<PriorIssue>& prior);
std::vector<PriorIssue> decode_prior_issues(std::string_view bytes);

// Compares every rank's prior issues for `op_title` ("all_reduce #3") on `group` (all[r] is rank
// r's). Returns nothing when every group that two or more ranks report has one count, else the
// MismatchError text naming the groups, each rank's count and the fix. Deterministic: every rank
// that calls it with the same records gets the same text.
std::optional<std::string> order_inversion(const std::string& group, const std::string& op_title,
                                           std::span<const std::vector<PriorIssue>> all);

}  // namespace lockstep::debug
