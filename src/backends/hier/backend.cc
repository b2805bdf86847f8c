// HierBackend: owns a flat tcp mesh of the whole group, the shm backend of this rank's host and
// the leaders' stage, and routes each op: all_reduce hierarchically, everything else flat. A
// failure anywhere aborts all three, so every rank of every host fails fast with the cause.
#include "backends/hier/backend.h"

#include <algorithm>

#include "backends/hier/all_reduce.h"
#include "backends/hier/flat_mesh.h"
#include "backends/hier/hosts.h"
#include "backends/hier/leader_stage.h"
#include "backends/hier/rank_names.h"
#include "backends/shm/backend.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

using namespace hier;

// The shm group of this rank's host: named after the group and the host's leader.
GroupConfig host_group_config(const GroupConfig& config, const std::vector<int>& host_ranks) {
  GroupConfig host = config;
  host.name = detail::concat(config.name, "/host", host_ranks.front());
  host.rank = static_cast<int>(std::find(host_ranks.begin(), host_ranks.end(), config.rank) -
                               host_ranks.begin());
  host.size = static_cast<int>(host_ranks.size());
  host.global_ranks.clear();
  for (int r : host_ranks) host.global_ranks.push_back(config.global_ranks[static_cast<size_t>(r)]);
  host.backend = "shm";
  return host;
}

class HierBackend final : public BackendBase {
 public:
  HierBackend(const GroupConfig& config, const HostMap& hosts)
      : BackendBase("hier", config),
        mesh_(config, host()),
        host_ranks_(hosts.ranks_with(config.rank)) {
    if (host_ranks_.size() > 1) {
      GroupConfig host = host_group_config(config, host_ranks_);
      host_rank_ = host.rank;
      host_group_ = shm::make_host_stage(host);
    }
    if (host_rank_ == 0 && hosts.hosts.size() > 1)
      leaders_ = std::make_unique<TcpLeaderStage>(mesh_, hosts.leaders());
  }

  bool prefers_inline(const Op& op) const override {
    return op.kind != OpKind::all_to_all && small_enough_to_inline(op);
  }

  void run(const Op& op) override {
    guarded(op, [&] {
      if (host_group_) host_group_->set_enclosing(op);
      if (op.kind == OpKind::all_reduce)
        all_reduce_hierarchical({.host_group = host_group_.get(),
                                 .host_ranks = host_ranks_,
                                 .host_rank = host_rank_,
                                 .leaders = leaders_.get(),
                                 .group_size = size(),
                                 .scratch = &scratch_},
                                op);
      else
        mesh_.run(op);
    });
  }

  void shutdown(Deadline deadline) override {
    if (failed() || shut_down_) return;
    shut_down_ = true;
    if (host_group_) host_group_->shutdown(deadline);
    mesh_.goodbye(deadline);
  }

  std::vector<int> unreachable_ranks() const override { return mesh_.unreachable_ranks(); }
  std::shared_ptr<PeerLinks> peer_links() const override { return mesh_.links(); }

 private:
  void tell_peers(ErrorClass error_class, const std::string& reason) override {
    // The note first: a peer that only sees our socket close looks there for the reason.
    write_note(reason);
    mesh_.abort(error_class, reason);
    // [Outside this host] in rank_names.h: the reason already names ranks of the whole group.
    if (host_group_) host_group_->abort_as(error_class, std::string(kOutsideHost) + reason);
  }

  FlatMesh mesh_;
  std::vector<int> host_ranks_;
  int host_rank_ = 0;
  std::unique_ptr<shm::HostStage> host_group_;
  std::unique_ptr<LeaderStage> leaders_;
  Scratch scratch_;
  bool shut_down_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_hier_backend(const GroupConfig& config) {
  return std::make_unique<HierBackend>(config, exchange_hosts(config));
}

}  // namespace lockstep
