#include "launcher/launcher.h"

#include <cstdlib>
#include <memory>
#include <optional>

#include "core/host_cores.h"
#include "launcher/child_env.h"
#include "launcher/culprit.h"
#include "launcher/guardian.h"
#include "launcher/log_files.h"
#include "launcher/rank_output.h"
#include "launcher/rendezvous.h"
#include "launcher/signals.h"
#include "launcher/summary.h"
#include "launcher/supervisor.h"
#include "net/socket.h"

namespace lockstep::launcher {
namespace {

// OMP_NUM_THREADS for the ranks when the user has not set it; says so once.
std::optional<int> omp_threads(const LaunchOptions& o) {
  if (std::getenv("OMP_NUM_THREADS")) return std::nullopt;
  int cores = detail::process_cores();
  int threads = default_omp_threads(cores, o.nproc_per_node);
  say(detail::concat("OMP_NUM_THREADS is not set; giving each rank OMP_NUM_THREADS=", threads, " (",
                     cores, " cores / ", o.nproc_per_node,
                     " local ranks). Set it yourself to override."));
  return threads;
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& options)
      : o_(options), omp_(omp_threads(options)), host_(net::hostname()) {}
  int run();

 private:
  AttemptResult run_attempt(int previous);
  AttemptPlan plan_for(const WorldLayout& layout);
  void report(int attempt, const AttemptResult& result);
  bool restartable(const AttemptResult& result) const;
  void announce(const WorldLayout& layout) const;
  SummaryContext context() const { return {layout_.node_rank, run_id_, o_.max_restarts}; }

  const LaunchOptions& o_;
  Guardian guardian_;  // first: forked before any other thread exists
  SignalCatcher signals_;
  std::optional<int> omp_;
  std::string host_;
  std::string log_root_;
  ScratchDir error_root_;  // error files when there is no log directory
  std::string run_id_;
  std::unique_ptr<Rendezvous> sync_;
  WorldLayout layout_;  // of the latest attempt
  std::vector<AttemptResult> attempts_;
};

int Launcher::run() {
  log_root_ = prepare_log_root(o_);
  if (!log_root_.empty() && o_.log_dir.empty()) say("rank logs go to " + log_root_);
  sync_ = make_rendezvous(o_, signals_);
  for (int previous = -1;;) {
    AttemptResult result = run_attempt(previous);
    const int attempt = result.attempt;
    previous = attempt;
    attempts_.push_back(result);
    if (result.end == AttemptEnd::succeeded) {
      write_all(2, format_success_summary(attempts_, context()));
      sync_->leave();
      return 0;
    }
    report(attempt, result);
    if (result.end == AttemptEnd::remote_failed && result.remote->membership_change) {
      say(detail::concat("attempt ", attempt, " ended for a membership change (",
                         result.remote->what,
                         "); re-forming the job (not counted against --max-restarts)"));
      continue;
    }
    if (restartable(result) && layout_.restart_count < o_.max_restarts) {
      say(detail::concat("attempt ", attempt, " failed: ", describe_attempt(result),
                         "; restarting the local group (restart ", layout_.restart_count + 1,
                         " of ", o_.max_restarts, ")"));
      continue;
    }
    if (result.root_cause && !result.root_cause->error_file.empty()) error_root_.keep();
    write_all(2, format_failure_summary(attempts_, context()));
    sync_->leave();
    return failure_exit_code(result);
  }
}

AttemptResult Launcher::run_attempt(int previous) {
  signals_.drain();
  if (signals_.first_termination() != 0) throw Interrupted(signals_.first_termination());
  layout_ = sync_->join(previous);
  const WorldLayout& layout = layout_;
  const int attempt = layout.attempt;
  run_id_ = layout.run_id;
  if (o_.elastic) announce(layout);
  RemoteCheck remote;
  if (sync_->multi_node()) remote = [this, attempt] { return sync_->check_failure(attempt); };
  Supervisor supervisor(plan_for(layout), guardian_, signals_, remote);
  AttemptResult result = supervisor.run();
  if (o_.elastic)
    result.membership =
        detail::concat("world size ", layout.world_size, " on ", layout.nodes.size(),
                       " node(s), this one node ", layout.node_rank);
  if (result.end == AttemptEnd::failed || result.end == AttemptEnd::remote_failed) {
    try {
      result.culprit = read_culprit(sync_->store(), layout.run_id, attempt, layout.world_size);
    } catch (const std::exception&) {
      // No store to ask: the summary names the first rank to fail.
    }
  }
  if (result.end != AttemptEnd::succeeded) return result;
  try {
    if (auto failure = sync_->wait_outcome(attempt)) {
      result.end = AttemptEnd::remote_failed;
      result.remote = failure;
    }
  } catch (const Interrupted&) {
    throw;
  } catch (const Error& e) {
    result.end = AttemptEnd::remote_failed;
    result.remote =
        RemoteFailure{.node_rank = 0,
                      .exit_code = 1,
                      .what = std::string("lost contact with node 0's store: ") + e.what(),
                      .restartable = false};
  }
  return result;
}

// An elastic attempt's world, once decided: the launcher log line that shows membership changes.
void Launcher::announce(const WorldLayout& layout) const {
  std::string nodes;
  for (size_t r = 0; r < layout.nodes.size(); ++r)
    nodes += detail::concat(r == 0 ? "" : ", ", r, ": ", layout.nodes[r].host, " x",
                            layout.nodes[r].nproc);
  say(detail::concat(
      "attempt ", layout.attempt, ": world size ", layout.world_size, " on ", layout.nodes.size(),
      " node(s) (", nodes, "); this node is node ", layout.node_rank, ", ranks ",
      layout.rank_offset, "..", layout.rank_offset + o_.nproc_per_node - 1,
      "; restarts after failures so far ", layout.restart_count, " of ", o_.max_restarts));
}

AttemptPlan Launcher::plan_for(const WorldLayout& layout) {
  const int attempt = layout.attempt;
  std::string log_dir = attempt_log_dir(log_root_, attempt);
  return AttemptPlan{
      .attempt = attempt,
      .node_rank = layout.node_rank,
      .rank_offset = layout.rank_offset,
      .world_size = layout.world_size,
      .nproc = o_.nproc_per_node,
      .nnodes = static_cast<int>(layout.nodes.size()),
      .job = JobEnvironment{.master_addr = o_.master_addr,
                            .master_port = layout.master_port,
                            .store_port = sync_->store_port(),
                            .restart_count = layout.restart_count,
                            .attempt = attempt,
                            .max_restarts = o_.max_restarts,
                            .run_id = layout.run_id,
                            .omp_num_threads = omp_,
                            .secret = o_.secret,
                            .bind_addr = o_.bind_addr},
      .program_path = o_.program_path,
      .argv = o_.command,
      .routes = output_routes(o_, !log_dir.empty()),
      .log_dir = log_dir,
      .error_dir = log_dir.empty() ? attempt_log_dir(error_root_.path(), attempt) : log_dir,
      .monitor_interval = o_.monitor_interval,
      .term_timeout = o_.term_timeout,
      .host = host_,
  };
}

// A rank's failure is worth a restart; a signal to any launcher or a lost store ends the job.
bool Launcher::restartable(const AttemptResult& result) const {
  if (signals_.first_termination() != 0) return false;
  if (result.end == AttemptEnd::remote_failed) return result.remote->restartable;
  return result.end == AttemptEnd::failed;
}

// Tells the other nodes about a local failure (best effort: node 0 may be gone).
void Launcher::report(int attempt, const AttemptResult& result) {
  if (result.end == AttemptEnd::remote_failed) return;
  try {
    // A node of an elastic job that is stopped leaves it; the others re-form without it. The
    // store's host cannot leave: the job ends with it.
    const bool leaves =
        o_.elastic && result.end == AttemptEnd::interrupted && !sync_->hosts_store();
    sync_->report_failure(
        attempt,
        RemoteFailure{.node_rank = layout_.node_rank,
                      .exit_code = failure_exit_code(result),
                      .what = leaves ? "left the job: its launcher was " + describe_attempt(result)
                                     : describe_attempt(result),
                      .restartable = result.end == AttemptEnd::failed || leaves});
  } catch (const Error& e) {
    say(std::string("could not tell the other nodes about the failure: ") + e.what());
  }
}

}  // namespace

int run_launcher(const LaunchOptions& options) {
  Launcher launcher(options);
  try {
    return launcher.run();
  } catch (const Interrupted& e) {
    say("interrupted by " + signal_name(e.signal) + " while waiting for the other nodes");
    return 128 + e.signal;
  }
}

}  // namespace lockstep::launcher
