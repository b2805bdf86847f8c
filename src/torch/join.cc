// Join (include/lockstep/torch/join.h): the per-iteration all_reduce and the joined rank's loop.
#include "lockstep/torch/join.h"

#include <exception>
#include <sstream>
#include <vector>

#include "core/log.h"
#include "lockstep/core/error.h"

namespace lockstep::torch {

namespace {

constexpr const char* kWhat = "Join";

}  // namespace

Joinable::~Joinable() {
  // Destroyed while its Join lives (declared after it): the Join forgets it.
  if (join_) std::erase(join_->joinables_, this);
}

JoinIteration Joinable::notify_join() {
  if (!join_) return {};
  if (join_->joinables_.empty() || join_->joinables_.front() != this) return join_->last_;
  return join_->exchange(/*training=*/true);
}

Join::Join(std::vector<Joinable*> joinables, JoinOptions options)
    : joinables_(std::move(joinables)),
      options_(options),
      uncaught_at_start_(std::uncaught_exceptions()) {
  LOCKSTEP_ENFORCE(!joinables_.empty(), InvalidArgument, kWhat, ": no joinable objects");
  for (size_t i = 0; i < joinables_.size(); ++i) {
    Joinable* j = joinables_[i];
    LOCKSTEP_ENFORCE(j != nullptr, InvalidArgument, kWhat, ": joinable #", i, " is null");
    LOCKSTEP_ENFORCE(j->join_ == nullptr, InvalidArgument, kWhat, ": joinable #", i,
                     " is already in another active Join");
    ProcessGroup& g = j->join_process_group();
    if (!group_) group_ = &g;
    LOCKSTEP_ENFORCE(&g == group_, InvalidArgument, kWhat, ": joinable #", i,
                     " uses another process group ('", g.name(), "') than joinable #0 ('",
                     group_->name(), "'); the joinables of one Join share one group");
  }
  if (!options_.enable) return;
  for (Joinable* j : joinables_) j->join_ = this;
  last_ = {.world_size = group_->size(),
           .training_ranks = group_->size(),
           .first_training_rank = 0,
           .gradient_scale = 1.0};
}

Join::~Join() {
  if (!done_ && options_.enable && std::uncaught_exceptions() <= uncaught_at_start_) {
    log_warning(kWhat, ": rank ", group_->rank(), " of group '", group_->name(),
                "' left its Join without calling join(); ranks still training will wait for it "
                "until their deadline");
  }
  detach();
}

void Join::detach() {
  for (Joinable* j : joinables_) {
    if (j && j->join_ == this) j->join_ = nullptr;
  }
}

JoinIteration Join::exchange(bool training) {
  ProcessGroup& g = *group_;
  const int n = g.size();
  std::vector<int32_t> training_flags(static_cast<size_t>(n), 0);
  training_flags[static_cast<size_t>(g.rank())] = training ? 1 : 0;
  g.all_reduce(view(training_flags), {.op = ReduceOp::sum, .timeout = options_.timeout})->wait();
  JoinIteration it{.world_size = n, .training_ranks = 0, .first_training_rank = -1};
  std::ostringstream joined_ranks;
  int joined_count = 0;
  for (int r = 0; r < n; ++r) {
    if (training_flags[static_cast<size_t>(r)]) {
      it.training_ranks += 1;
      if (it.first_training_rank < 0) it.first_training_rank = r;
    } else {
      joined_ranks << (joined_count++ ? ", " : "") << r;
    }
  }
  if (it.training_ranks > 0 && !options_.divide_by_initial_world_size)
    it.gradient_scale = static_cast<double>(n) / it.training_ranks;
  if (options_.throw_on_early_termination && it.training_ranks > 0 && joined_count > 0) {
    throw Error(::lockstep::detail::concat(
        kWhat, ": rank", joined_count > 1 ? "s " : " ", joined_ranks.str(), " of group '", g.name(),
        "' ran out of inputs while ", it.training_ranks, it.training_ranks > 1 ? " ranks" : " rank",
        " still train; throw_on_early_termination stops every rank here (this is rank ", g.rank(),
        ")"));
  }
  last_ = it;
  return it;
}

void Join::join() {
  if (done_) return;
  done_ = true;
  if (!options_.enable) return;
  bool first = true;
  bool last_joiner = false;
  while (true) {
    JoinIteration it = exchange(/*training=*/false);
    if (it.training_ranks == 0) {
      last_joiner = first;
      break;
    }
    first = false;
    for (Joinable* j : joinables_) j->join_shadow(it);
  }
  // The rank that joined last holds the most recent parameters; the highest such rank decides.
  int32_t authority = last_joiner ? group_->rank() : -1;
  group_
      ->all_reduce(BufferView{&authority, 1, DType::i32},
                   {.op = ReduceOp::max, .timeout = options_.timeout})
      ->wait();
  for (Joinable* j : joinables_) j->join_finish(authority);
  detach();
}

}  // namespace lockstep::torch
