// Join: training with uneven inputs. Ranks that run out of data keep matching the collectives of
// the ranks still training, until every rank has run out, so no rank waits forever for a rank
// that left the loop (torch.distributed.algorithms.Join, for LibTorch).
//
//   lockstep::torch::DistributedDataParallel ddp(net, group);
//   lockstep::torch::ZeroRedundancyOptimizer opt(net->parameters(), group, make_adam);
//   {
//     lockstep::torch::Join join({&ddp, &opt});
//     for (auto& batch : my_batches) {       // a different number of batches on each rank
//       opt.zero_grad();
//       torch::nll_loss(ddp(batch.data), batch.target).backward();
//       opt.step();
//     }
//     join.join();                           // out of data: shadow the others until all are
//   }
//
// [Iterations] While a Join is active, the first synchronising forward of each iteration on a
// rank still training (grad mode on, outside no_sync()) adds one small all_reduce over the group:
// each rank says whether it still trains. A rank inside join() contributes "joined" and then, for
// each such iteration, runs every joinable's shadow (join_shadow): the same collectives the
// training ranks issue in that iteration, with zero contributions. For DDP: the buffer broadcast
// (from the lowest training rank, whose buffers are current), every gradient bucket's all_reduce
// with zero gradients, and the end-of-backward steps. For ZeroRedundancyOptimizer: its step, so
// the joined rank still updates its shard of the parameters and sends it. When the all_reduce
// finds no rank training, every rank leaves join() together.
//
// [Averaging] Joined ranks contribute zero gradients. With divide_by_initial_world_size (the
// default) gradients are divided by the group size, so a joined rank counts as a rank with a zero
// gradient; otherwise by the number of ranks still training in that iteration, which is one
// process training on the concatenation of their batches.
//
// [End] After the last iteration every joinable's join_finish runs on every rank. DDP then
// broadcasts the parameters and buffers of the rank that joined last (the highest such rank),
// so every replica ends equal even when the joined ranks' own optimizers stopped stepping.
//
// [Rules] Every rank constructs its Join with the same joinables, in the order an iteration calls
// them (DDP before its optimizer), over one group. Every synchronising forward must be followed by
// its backward. join() is collective: every rank calls it once, when it runs out of data. A Join
// destroyed without join() (an exception left the loop) only detaches from its joinables; the
// other ranks then fail at their deadline, as they do for any rank that neither trains nor joins:
// their TimeoutError names it.
// With throw_on_early_termination, every rank throws lockstep::Error, naming the joined ranks, at
// the first iteration in which some rank has joined, instead of shadowing.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "lockstep/comm/options.h"
#include "lockstep/group/process_group.h"

namespace lockstep::torch {

struct JoinOptions {
  // false: the Join does nothing (no all_reduce, no shadowing); join() returns at once.
  bool enable = true;
  // Throw on every rank once some rank has joined, instead of shadowing (see [Rules]).
  bool throw_on_early_termination = false;
  // See [Averaging].
  bool divide_by_initial_world_size = true;
  // Deadline of the Join's own collectives (the per-iteration all_reduce, the final agreement).
  std::chrono::milliseconds timeout = kGroupTimeout;
};

// One iteration as the Join's all_reduce saw it.
struct JoinIteration {
  int world_size = 0;
  int training_ranks = 0;  // ranks not yet joined
  int first_training_rank = -1;
  // Factor for the averaged gradients (see [Averaging]): 1, or world_size / training_ranks.
  double gradient_scale = 1.0;
};

class Join;

// An object whose iterations issue collectives a joined rank must shadow (DDP, ZeRO).
class Joinable {
 public:
  virtual ~Joinable();

 protected:
  Joinable() = default;
  Joinable(const Joinable&) = delete;
  Joinable& operator=(const Joinable&) = delete;

  // The group of its collectives. Every joinable of one Join uses the same group.
  virtual ProcessGroup& join_process_group() = 0;
  // On a joined rank, once per iteration of the ranks still training: the same collectives.
  virtual void join_shadow(const JoinIteration& iteration) = 0;
  // On every rank after the last iteration; `authority` is the rank that joined last.
  virtual void join_finish(int authority) { (void)authority; }

  // A training rank starts an iteration. When this is the first joinable of an active Join,
  // issues the Join's all_reduce; otherwise returns what the last one found. Without an active
  // Join: a full group, no collective.
  JoinIteration notify_join();

 private:
  friend class Join;
  Join* join_ = nullptr;
};

// RAII: activates Join on the joinables for its lifetime (see the top of this file).
class Join {
 public:
  explicit Join(std::vector<Joinable*> joinables, JoinOptions options = {});
  // Detaches from the joinables; does not join (see [Rules]). Logs a warning when join() was not
  // called and no exception is unwinding.
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank has no more inputs: shadows the other ranks' iterations until every rank has
  // joined, then runs the joinables' join_finish. Collective; a second call does nothing.
  void join();

  const JoinOptions& options() const { return options_; }

 private:
  friend class Joinable;
  JoinIteration exchange(bool training);
  void detach();

  std::vector<Joinable*> joinables_;
  JoinOptions options_;
  ProcessGroup* group_ = nullptr;
  JoinIteration last_{};
  bool done_ = false;
  int uncaught_at_start_ = 0;
};

}  // namespace lockstep::torch
