#include "debug/fingerprint_check.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "core/fnv1a.h"
#include "debug/fingerprint.h"
#include "debug/issue_order.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

// Step 1's record: the same size on every rank, whatever the call.
struct Digest {
  uint64_t hash = 0;
  uint64_t bytes = 0;
  bool operator==(const Digest&) const = default;
};

// A backend whose collectives are fingerprint-checked first; everything else is passed through.
class FingerprintedBackend final : public Backend {
 public:
  FingerprintedBackend(std::unique_ptr<Backend> inner, const GroupConfig& config,
                       FingerprintRoute route)
      : inner_(std::move(inner)),
        check_(*inner_, config.store, route, config.name, config.rank, config.size) {}

  const std::string& name() const override { return inner_->name(); }
  void check(const Op& op) const override { inner_->check(op); }
  void run(const Op& op) override {
    check_.check(op);
    inner_->run(op);
  }
  // Sends and recvs are not fingerprinted: these pass through.
  void prepare(Op& op) override { inner_->prepare(op); }
  bool fuses_p2p(const Op& op) const override { return inner_->fuses_p2p(op); }
  void run_p2p_group(std::span<const Op> ops) override { inner_->run_p2p_group(ops); }
  // Never inline: every op runs on the progress thread, so that a program's behaviour under
  // DETAIL does not depend on message sizes, and a cross-group order inversion reaches both
  // groups' fingerprint exchanges (debug/issue_order.h) instead of deadlocking the callers.
  bool prefers_inline(const Op&) const override { return false; }
  std::string device_problem(Device device) const override {
    return inner_->device_problem(device);
  }
  SharedBuffer allocate(size_t bytes, uint64_t index, Deadline deadline) override {
    return inner_->allocate(bytes, index, deadline);
  }
  void abort(const std::string& reason) override { inner_->abort(reason); }
  void shutdown(Deadline deadline) override { inner_->shutdown(deadline); }
  std::vector<int> unreachable_ranks() const override { return inner_->unreachable_ranks(); }
  std::shared_ptr<PeerLinks> peer_links() const override { return inner_->peer_links(); }

 private:
  std::unique_ptr<Backend> inner_;
  FingerprintCheck check_;
};

}  // namespace

namespace {

// One rank's record: the fingerprint's length, the fingerprint, then the prior issues.
std::string record_of(const Op& op) {
  std::string fingerprint = encode(fingerprint_of(op));
  auto length = static_cast<uint32_t>(fingerprint.size());
  std::string record(reinterpret_cast<const char*>(&length), sizeof length);
  return record + fingerprint + encode_prior_issues(op.prior_issues);
}

std::pair<Fingerprint, std::vector<PriorIssue>> decode_record(std::string_view record) {
  uint32_t length = 0;
  LOCKSTEP_ENFORCE(record.size() >= sizeof length, Error, "fingerprint check: a ", record.size(),
                   "-byte value is not a record");
  std::memcpy(&length, record.data(), sizeof length);
  record.remove_prefix(sizeof length);
  LOCKSTEP_ENFORCE(length <= record.size(), Error, "fingerprint check: a record claims a ", length,
                   "-byte fingerprint in ", record.size(), " bytes");
  return {decode(record.substr(0, length)), decode_prior_issues(record.substr(length))};
}

}  // namespace

FingerprintCheck::FingerprintCheck(Backend& transport, std::shared_ptr<Store> store,
                                   FingerprintRoute route, std::string group, int rank, int size)
    : transport_(transport),
      store_(std::move(store)),
      route_(route),
      group_(std::move(group)),
      rank_(rank),
      size_(size) {
  LOCKSTEP_ENFORCE(route_ == FingerprintRoute::backend || store_ != nullptr, ConfigError, "group '",
                   group_, "': LOCKSTEP_DEBUG=DETAIL checks backend ", transport_.name(),
                   "'s calls through the group's store, but the group has "
                   "none; unset LOCKSTEP_DEBUG or give the group a store");
}

void FingerprintCheck::exchange(const Op& op, int step, const void* mine, size_t bytes, void* all) {
  Op x{.kind = OpKind::all_gather,
       .seq = op.seq,
       .dtype = DType::u8,
       .tag = kSideExchangeTag,
       .input = mine,
       .output = all,
       .counts = std::vector<size_t>(static_cast<size_t>(size_), bytes),
       .deadline = op.deadline};
  const std::string context =
      op.name() + " (in the LOCKSTEP_DEBUG=DETAIL fingerprint exchange before it): ";
  try {
    if (route_ == FingerprintRoute::store)
      store_all_gather(*store_, group_, rank_, size_, op, step, mine, bytes, all);
    else
      transport_.run(x);
  } catch (const Error& e) {
    const bool mismatch = error_class_of(e) == ErrorClass::mismatch;
    throw_as(error_class_of(e),
             context + e.what() +
                 (mismatch ? ". (If a rank runs without the check, every rank must set the same "
                             "LOCKSTEP_DEBUG.)"
                           : ""));
  }
}

void FingerprintCheck::check(const Op& op) {
  if (!is_fingerprinted(op.kind) || size_ < 2) return;
  const size_t n = static_cast<size_t>(size_);
  std::string mine = record_of(op);
  Digest digest{.hash = fnv1a(mine), .bytes = mine.size()};
  std::vector<Digest> digests(n);
  exchange(op, 1, &digest, sizeof digest, digests.data());
  const bool pairwise = op.kind == OpKind::all_to_all && op.variable;
  if (!pairwise &&
      std::all_of(digests.begin(), digests.end(), [&](const Digest& d) { return d == digests[0]; }))
    return;
  size_t longest = 0;
  for (const Digest& d : digests) longest = std::max<size_t>(longest, d.bytes);
  mine.resize(longest, '\0');
  std::string everything(longest * n, '\0');
  exchange(op, 2, mine.data(), longest, everything.data());
  std::vector<Fingerprint> all;
  std::vector<std::vector<PriorIssue>> prior;
  all.reserve(n);
  prior.reserve(n);
  for (size_t r = 0; r < n; ++r) {
    auto [fingerprint, issues] =
        decode_record(std::string_view(everything).substr(r * longest, digests[r].bytes));
    all.push_back(std::move(fingerprint));
    prior.push_back(std::move(issues));
  }
  auto mismatch = fingerprint_mismatch(all);
  if (!mismatch) mismatch = order_inversion(group_, op.name(), prior);
  if (!mismatch) return;
  // [Agreed failure] A rank that throws aborts the backend, and an abort can overtake data a
  // slower peer has not read yet. One more exchange, which completes on a rank only once every
  // rank has read all of step 2, means every rank already holds the text below: an abort seen
  // during it changes nothing.
  uint8_t done = 1;
  std::vector<uint8_t> all_done(n);
  try {
    exchange(op, 3, &done, 1, all_done.data());
  } catch (const Error&) {
    // A peer finished first and aborted; it raises the same error.
  }
  throw MismatchError(*mismatch);
}

std::unique_ptr<Backend> with_fingerprints(std::unique_ptr<Backend> inner,
                                           const GroupConfig& config, FingerprintRoute route) {
  return std::make_unique<FingerprintedBackend>(std::move(inner), config, route);
}

std::unique_ptr<Backend> with_fingerprints(std::unique_ptr<Backend> inner,
                                           const GroupConfig& config) {
  FingerprintRoute route = fingerprint_route(*inner);
  return with_fingerprints(std::move(inner), config, route);
}

}  // namespace lockstep::debug
