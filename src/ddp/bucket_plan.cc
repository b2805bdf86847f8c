#include "ddp/bucket_plan.h"

#include <algorithm>
#include <map>

#include "lockstep/core/error.h"

namespace lockstep::ddp {

namespace {

void check_permutation(std::span<const size_t> order, size_t n) {
  LOCKSTEP_ENFORCE(order.size() == n, InvalidArgument, "DDP bucket assignment: the order has ",
                   order.size(), " entries for ", n, " parameters; it must list each once");
  std::vector<bool> seen(n, false);
  for (size_t p : order) {
    LOCKSTEP_ENFORCE(p < n && !seen[p], InvalidArgument,
                     "DDP bucket assignment: the order lists parameter ", p,
                     p < n ? " twice" : " which does not exist", " (", n, " parameters)");
    seen[p] = true;
  }
}

// Buckets being filled, one per dtype, and how many buckets of that dtype were closed.
struct OpenBucket {
  BucketSpec spec;
  size_t first_position = 0;  // position in the order of its first parameter
  int closed = 0;
};

}  // namespace

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  return order;
}

std::vector<BucketSpec> assign_buckets(std::span<const ParamSpec> params,
                                       std::span<const size_t> order, const BucketSizes& sizes) {
  check_permutation(order, params.size());
  LOCKSTEP_ENFORCE(sizes.first_bucket_bytes > 0 && sizes.bucket_bytes > 0, InvalidArgument,
                   "DDP bucket caps must be positive (first_bucket_bytes = ",
                   sizes.first_bucket_bytes, ", bucket_bytes = ", sizes.bucket_bytes, ")");
  std::vector<std::pair<size_t, BucketSpec>> done;  // (first position, bucket)
  std::map<DType, OpenBucket> open;
  auto close = [&](OpenBucket& b) {
    done.emplace_back(b.first_position, std::move(b.spec));
    b.spec = BucketSpec{};
    b.closed += 1;
  };
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const ParamSpec& p = params[order[pos]];
    OpenBucket& b = open[p.dtype];
    size_t cap = b.closed == 0 ? sizes.first_bucket_bytes : sizes.bucket_bytes;
    if (!b.spec.params.empty() && b.spec.bytes() + p.bytes() > cap) close(b);
    if (b.spec.params.empty()) {
      b.spec.dtype = p.dtype;
      b.first_position = pos;
    }
    b.spec.params.push_back(order[pos]);
    b.spec.offsets.push_back(b.spec.count);
    b.spec.count += p.count;
  }
  for (auto& [dtype, b] : open) {
    if (!b.spec.params.empty()) close(b);
  }
  std::stable_sort(done.begin(), done.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BucketSpec> buckets;
  buckets.reserve(done.size());
  for (auto& [pos, spec] : done) buckets.push_back(std::move(spec));
  return buckets;
}

}  // namespace lockstep::ddp
