// The DDP reducer: averages gradients over a process group in buckets, overlapping the
// communication with backward. Framework-agnostic: it sees parameters as sizes and dtypes,
// gradients through a GradientAccess, and communicates through a ProcessGroup. The LibTorch
// adapter (src/torch/ddp.cc) wires autograd hooks to it; tests/ddp drives it directly.
//
// [Iteration] One synchronised backward pass:
//   begin_backward()          every parameter pending; buckets empty
//   mark_unused(params)       optional, right after begin: parameters known to get no gradient
//   mark_ready(p) ...         once per parameter whose gradient is final, in any order: its
//                             gradient is copied into its bucket slot; each bucket whose
//                             parameters are all ready is launched through the hook, in bucket
//                             order (bucket k only after buckets 0..k-1)
//   finalize()                end of backward: parameters still pending are unused; all buckets
//                             launched, a "used" bitmap all_reduce(max)'d, every Work waited for,
//                             and the averages written back to the parameters that some rank used
// [Unused parameters] An unused parameter is reduced with whatever the access reads for it (its
// current gradient, or zeros), so the average counts it as zero from this rank; a parameter no
// rank used is not written back. Each is named once (per reducer) in a warning.
// [Rebuild] The first finalize records the order gradients arrived on each rank (unused ones
// last), broadcasts rank 0's order, and re-assigns the buckets by it (assign_buckets), so every
// rank gets the same layout. Slots keep their values across the move; layout_changed() tells
// the access.
//
// [Sharded gradients] (ZeRO-2) After set_gradient_owners, each parameter's average goes to its
// owner only. Within each bucket the parameters are grouped by owner (rank 0's first), so that a
// bucket is launched as one reduce_scatter_v(avg) whose segment r is rank r's: every rank receives
// the averages of the parameters it owns in that bucket. A parameter owned elsewhere has its
// gradient released (GradientAccess::release_gradient) as soon as it is copied into its bucket,
// and the buckets live only from the first gradient of an iteration to the end of finalize, so
// between iterations a rank holds the gradients of its own parameters only. Custom hooks and
// gradient views do not combine with it.
//
// Collective contract: begin..finalize is collective over the group (finalize issues the
// bitmap all_reduce, and the first one a broadcast). Every rank must run the same number of
// iterations.
// Thread-safety: none; one thread (the backward thread) calls everything.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ddp/bucket_memory.h"
#include "ddp/bucket_plan.h"
#include "ddp/comm_hook.h"
#include "ddp/info_log.h"
#include "lockstep/core/buffer.h"
#include "lockstep/group/process_group.h"

namespace lockstep::ddp {

// How the reducer reaches the gradients. Implemented by the framework adapter.
class GradientAccess {
 public:
  virtual ~GradientAccess() = default;
  // Copies parameter `param`'s current gradient into `slot` (same count and dtype), or zeros
  // the slot when the parameter has none. May skip the copy when the gradient already is the
  // slot (gradient as bucket view).
  virtual void read_gradient(size_t param, BufferView slot) = 0;
  // Writes the averaged gradient in `slot` into parameter `param`'s gradient (creating it if
  // needed), or makes the gradient a view of the slot.
  virtual void write_gradient(size_t param, BufferView slot) = 0;
  // The buckets moved (rebuild); every slot holds the values its old slot held.
  virtual void layout_changed() {}
  // Frees parameter `param`'s gradient: another rank owns it ([Sharded gradients]).
  virtual void release_gradient(size_t param) { (void)param; }
};

struct ReducerOptions {
  BucketSizes sizes;
  std::chrono::milliseconds timeout = kGroupTimeout;  // the reducer's own collectives
  BucketHook hook;                                    // empty: average_hook(timeout)
  bool rebuild_buckets = true;
  // Buckets from ProcessGroup::allocate (see [Shared buckets]); false: private memory. Host
  // memory only.
  bool shared_buckets = false;
  // Where private buckets live (bucket_memory.h); null: host_memory(). Must outlive the reducer.
  BucketMemory* memory = nullptr;
  // Prefix of warning messages, naming the caller.
  std::string what = "DistributedDataParallel";
  // Appended to the unused-parameter warning (the adapter's advice).
  std::string unused_advice;
  // Appended to the error for a parameter that gets a gradient twice in one backward.
  std::string repeat_advice;
};

struct ReducerStats {
  int64_t iterations = 0;        // finalized iterations
  int64_t rebuilds = 0;          // 0 or 1
  int64_t buckets_launched = 0;  // in total
  int64_t early_launched = 0;    // launched from mark_ready / mark_unused, not finalize
  int64_t shared_buckets = 0;  // current buckets in memory the group's peers map ([Bucket memory])
  double wait_seconds = 0;     // in finalize, waiting for the Works: exposed communication
};

class Reducer {
 public:
  // `group` and `access` must outlive the reducer. Allocates the buckets (reverse registration
  // order). Collective only with shared_buckets (every rank allocates its buckets together).
  // InvalidArgument for shared_buckets on a device.
  //
  // [Shared buckets] With shared_buckets, each bucket is a ProcessGroup::allocate buffer: on the
  // shm backend, memory every rank maps, so a bucket's all_reduce skips the copies in and out of
  // the group's segment (docs/shm.md, "Buffers from allocate"); elsewhere ordinary memory. The
  // reducer allocates at construction and at the rebuild, both of which every rank reaches in
  // the same order.
  Reducer(std::vector<ParamSpec> params, ProcessGroup& group, GradientAccess& access,
          ReducerOptions options);
  // Waits (each within its deadline) for Works still in flight, so their memory stays valid.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Starts an iteration. An iteration left unfinished (backward threw) is abandoned: its Works
  // are waited for and its state dropped.
  void begin_backward();
  // The framework's forward of a synchronised iteration starts. Optional: only the iteration
  // timings of the INFO log use it (info_log.h).
  void note_forward() { times_.forward_started(); }
  bool in_backward() const { return in_backward_; }
  // Marks `params` ready as unused (their slot is read through the access now). REQUIRES
  // in_backward().
  void mark_unused(std::span<const size_t> params);
  // Parameter p's gradient is final. Throws InvalidArgument when p is out of range, or already
  // ready in this iteration and its bucket already launched.
  void mark_ready(size_t p);
  // Ends the iteration (see [Iteration]). Rethrows the first communication error, after every
  // Work of the iteration has finished.
  void finalize();
  // A whole iteration with a zero gradient for every parameter and no warning: the collectives
  // of an iteration, for a rank that has no data left and shadows the others (Join). The
  // averages are written back as in finalize.
  void zero_iteration();

  void set_hook(BucketHook hook);
  // Starts [Sharded gradients]: owners[p] is the rank that receives parameter p's average. Every
  // rank passes the same owners, between iterations. InvalidArgument for a custom hook, a rank
  // outside the group, or a size other than the parameters'.
  void set_gradient_owners(std::vector<int> owners);
  bool shards_gradients() const { return !owners_.empty(); }
  // Parameter p's slot in its bucket, tagged with the memory's device. Valid until the next
  // rebuild, or longer while a copy of slot_owner(p) is held.
  BufferView slot(size_t p);
  // Shares ownership of the memory of p's current bucket.
  std::shared_ptr<void> slot_owner(size_t p) const { return storage_[bucket_of_[p]]; }
  const std::vector<BucketSpec>& buckets() const { return buckets_; }
  std::span<const ParamSpec> params() const { return params_; }
  const ReducerStats& stats() const { return stats_; }
  // Names of the parameters that got no gradient (on this rank) in some iteration so far.
  const std::set<size_t>& unused_seen() const { return warned_; }

 private:
  // Shared, so that views of a slot (a framework's gradient tensor) can keep it alive past a
  // rebuild or the reducer itself.
  using Storage = std::shared_ptr<std::byte>;

  void allocate(std::vector<BucketSpec> buckets);
  // [Sharded gradients]
  std::vector<BucketSpec> group_by_owner(std::vector<BucketSpec> buckets);
  void ensure_storage(size_t b);
  PendingReduction launch_sharded(size_t b);
  BufferView owned_slot(size_t p);  // p's average in its bucket's received segment
  void release_buckets();
  void mark(size_t p, bool used);
  void launch_ready();
  void launch(size_t b);
  void wait_all(std::exception_ptr& first);
  void warn_unused();
  void log_layout() const;  // INFO: the bucket layout (rank 0)
  void rebuild();
  std::vector<size_t> agreed_order();

  std::vector<ParamSpec> params_;
  ProcessGroup& group_;
  GradientAccess& access_;
  ReducerOptions options_;
  BucketMemory& memory_;

  std::vector<BucketSpec> buckets_;
  std::vector<Storage> storage_;         // one per bucket
  std::vector<size_t> bucket_of_;        // param -> bucket
  std::vector<size_t> index_in_bucket_;  // param -> position in its bucket

  // Per iteration.
  bool in_backward_ = false;
  std::vector<uint8_t> ready_;
  std::vector<uint8_t> used_;    // this rank; all_reduce(max)'d at finalize
  std::vector<size_t> pending_;  // per bucket: parameters not ready yet
  size_t next_launch_ = 0;
  std::vector<PendingReduction> inflight_;  // per bucket, once launched
  std::vector<size_t> arrival_;             // order of mark_ready, for the rebuild
  bool zero_contribution_ = false;          // in zero_iteration

  bool custom_hook_ = false;
  std::vector<int> owners_;                        // [Sharded gradients]; empty: off
  std::vector<std::vector<size_t>> shard_counts_;  // per bucket: its elements per owner rank
  std::vector<size_t> shard_start_;                // per bucket: where this rank's segment starts
  std::vector<Storage> received_;                  // per bucket, launched: this rank's segment

  std::set<size_t> warned_;
  ReducerStats stats_;
  IterationTimes times_;
};

}  // namespace lockstep::ddp
