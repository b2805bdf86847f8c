// Bucket assignment for the DDP reducer: which parameters' gradients share one flat buffer and
// one allreduce, and in which order the buckets are launched.
//
// [Bucketing] Parameters are taken in a given order (initially reverse registration order, the
// order backward usually produces gradients; after the first iteration the order gradients
// actually arrived). A bucket holds parameters of one dtype. The first bucket of each dtype is
// filled up to first_bucket_bytes, later ones up to bucket_bytes: a parameter that would push its
// bucket past the cap starts a new bucket, and a parameter larger than the cap gets a bucket of
// its own. Buckets are ordered by the position of their first parameter in the order, so bucket
// 0 holds the gradients expected first.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "lockstep/core/dtype.h"

namespace lockstep::ddp {

// A parameter as the reducer sees it: a name for messages, and its gradient's size and dtype.
struct ParamSpec {
  std::string name;  // "fc1.weight"
  size_t count = 0;  // elements
  DType dtype = DType::f32;
  size_t bytes() const { return count * element_size(dtype); }
};

struct BucketSizes {
  size_t first_bucket_bytes = size_t{1} << 20;
  size_t bucket_bytes = size_t{25} << 20;
};

// One bucket: its parameters in buffer order, and their element offsets in the flat buffer.
struct BucketSpec {
  DType dtype = DType::f32;
  std::vector<size_t> params;   // indices into the parameter list
  std::vector<size_t> offsets;  // element offset of params[i] in the bucket
  size_t count = 0;             // elements in the bucket
  size_t bytes() const { return count * element_size(dtype); }
  bool operator==(const BucketSpec&) const = default;
};

// [n-1, n-2, ..., 0]: reverse registration order.
std::vector<size_t> reverse_order(size_t n);

// Assigns every parameter of `params` to a bucket, following `order` (a permutation of
// [0, params.size())). Throws InvalidArgument when order is not such a permutation or a cap is 0.
std::vector<BucketSpec> assign_buckets(std::span<const ParamSpec> params,
                                       std::span<const size_t> order, const BucketSizes& sizes);

}  // namespace lockstep::ddp
