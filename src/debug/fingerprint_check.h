// FingerprintCheck: LOCKSTEP_DEBUG=DETAIL's comparison of every rank's collective call, before
// the collective runs.
//
// [Side channel] The fingerprints travel as all_gathers whose size never depends on the call
// being checked, so ranks that disagree on sizes cannot deadlock on them. They go over the
// group's own backend, or, for a backend that moves device memory only (nccl), over the group's
// store (fingerprint_exchange.h):
//   1. every rank all_gathers a 16-byte digest of its record: its fingerprint and its prior
//      issues on other groups (debug/issue_order.h), hashed, with the record's length. Equal
//      digests everywhere: the calls agree, the op runs.
//   2. otherwise (and always for all_to_all_v, whose per-rank counts legitimately differ), every
//      rank all_gathers its record padded to the longest length of step 1 (known to every
//      rank), decodes them all and compares (fingerprint_mismatch, then order_inversion).
//   3. on a mismatch, one more 1-byte all_gather before raising it (see [Agreed failure] in the
//      .cc), so that no rank's abort cuts a slower rank's step 2 short.
// Every rank sees the same data, so every rank takes the same steps and raises the same
// MismatchError. The exchanges carry the op's sequence number and run under its deadline, so a
// peer that dies or never arrives is caught by the backend's own detection (NetworkError naming
// it, or TimeoutError), reported as part of the checked op.
//
// Collective contract: check() runs on every rank of the group for each collective, in sequence
// order, from the thread that runs the group's ops; every rank must use the same LOCKSTEP_DEBUG
// (a rank without the check would meet the exchange in place of its op: a MismatchError that
// says so).
#pragma once

#include <memory>
#include <string>

#include "comm/backend.h"
#include "comm/op.h"
#include "debug/fingerprint_exchange.h"
#include "lockstep/store/store.h"

namespace lockstep::debug {

class FingerprintCheck {
 public:
  // `transport` carries the exchanges on the backend route, `store` on the store route; both
  // must outlive this. `group` names the group in errors and store keys.
  FingerprintCheck(Backend& transport, std::shared_ptr<Store> store, FingerprintRoute route,
                   std::string group, int rank, int size);

  // Compares op with every rank's call of the same sequence number, and the collectives each
  // rank issued on its other groups before it (Op::prior_issues, debug/issue_order.h). Throws
  // MismatchError when they differ; NetworkError or TimeoutError when the exchange fails.
  // Ignores send and recv.
  void check(const Op& op);

 private:
  // all_gather of `bytes` bytes per rank under op's sequence number and deadline; `step` is the
  // exchange's number within the op (1, 2, 3).
  void exchange(const Op& op, int step, const void* mine, size_t bytes, void* all);

  Backend& transport_;
  std::shared_ptr<Store> store_;
  FingerprintRoute route_;
  std::string group_;
  int rank_;
  int size_;
};

// Wraps a backend so that every collective is fingerprint-checked before it runs. ProcessGroup
// installs it when LOCKSTEP_DEBUG=DETAIL; otherwise nothing is wrapped and no op pays for it.
// The route: fingerprint_route(*inner) unless given.
std::unique_ptr<Backend> with_fingerprints(std::unique_ptr<Backend> inner,
                                           const GroupConfig& config);
std::unique_ptr<Backend> with_fingerprints(std::unique_ptr<Backend> inner,
                                           const GroupConfig& config, FingerprintRoute route);

}  // namespace lockstep::debug
