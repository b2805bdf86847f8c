#include "debug/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "core/log.h"
#include "debug/flight_recorder_dump.h"
#include "debug/signal_dump.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDefaultStall{60'000};
constexpr milliseconds kStatusReadWait{1'000};
// Marks a message that already names the ranks (a peer's abort reason repeats it).
constexpr std::string_view kSummaryMark = "; last completed:";

// "60", "1.5": seconds with at most one decimal.
std::string seconds_text(double seconds) {
  return detail::concat(std::round(seconds * 10.0) / 10.0);
}

milliseconds stall_for(const WatchdogOptions& o) {
  if (o.stall_warning.count() > 0) return o.stall_warning;
  return std::max(milliseconds(1), std::min(kDefaultStall, o.timeout / 2));
}

// Often enough that status keys are fresh when a timeout is reported (a tenth of the timeout)
// and that a stall warning comes on time, rarely enough to cost nothing.
milliseconds tick_interval(milliseconds stall, milliseconds timeout) {
  return std::clamp(std::min(stall / 4, timeout / 10), milliseconds(10), milliseconds(1'000));
}

}  // namespace

Watchdog::Watchdog(WatchdogOptions options)
    : options_(std::move(options)),
      recorder_(options_.recorder_size),
      stall_(stall_for(options_)),
      tick_(tick_interval(stall_, options_.timeout)) {
  publish_if_changed(true);
  thread_ = std::thread([this] { loop(); });
  register_signal_dump(this);
}

Watchdog::~Watchdog() {
  unregister_signal_dump(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, tick_, [&] { return stop_; })) {
    lock.unlock();
    publish_if_changed(false);
    warn_if_stalled();
    lock.lock();
  }
}

void Watchdog::publish_if_changed(bool force) {
  std::lock_guard<std::mutex> lock(publish_mu_);
  Progress now = recorder_.progress();
  auto running = recorder_.running();
  if (running && (!running->collective() || running->started_us == 0)) running.reset();
  const uint64_t running_id = running ? running->id : ~uint64_t{0};
  if (!force && now.entered == published_.entered && now.started == published_.started &&
      now.completed == published_.completed && running_id == published_running_)
    return;
  try {
    publish_status(*options_.store, options_.group, options_.rank,
                   RankStatus(now, running ? running->op : "", running ? running->seq : 0));
    published_ = now;
    published_running_ = running_id;
  } catch (const std::exception& e) {
    // The store may be gone with the process that hosted it; the data path reports that.
    if (!store_failed_)
      log_line(LogLevel::info, detail::concat("watchdog of group '", options_.group,
                                              "': cannot publish status: ", e.what()));
    store_failed_ = true;
  }
}

// Records in the store whom this rank waited for ([Blame keys]); best effort.
void Watchdog::blame(const std::vector<int>& missing, const std::string& op_summary) {
  Blame b{.reporter = options_.global_rank, .op = op_summary};
  for (int r : missing)
    b.culprits.push_back(
        options_.global_ranks.empty() ? r : options_.global_ranks.at(static_cast<size_t>(r)));
  try {
    publish_blame(options_.report_store ? *options_.report_store : *options_.store, b);
  } catch (const std::exception&) {
    // The launcher then names the first rank to fail, as it would without this key.
  }
}

std::string Watchdog::statuses_text(uint64_t seq, bool waiting_form, const std::string& blamed_op) {
  RankStatuses statuses;
  try {
    statuses = read_statuses(*options_.store, options_.group, options_.size, kStatusReadWait);
  } catch (const std::exception& e) {
    return detail::concat(waiting_form ? "; " : "", "the other ranks' status is unavailable (",
                          e.what(), ")");
  }
  if (!blamed_op.empty())
    if (auto missing = ranks_not_entered(statuses, seq); !missing.empty())
      blame(missing, blamed_op);
  if (!waiting_form) return describe_statuses(statuses, seq);
  std::vector<int> missing = ranks_not_entered(statuses, seq);
  std::string full = describe_statuses(statuses, seq);
  if (missing.empty()) return "; " + full;
  return " for ranks " + rank_list(missing) + full.substr(full.find(kSummaryMark));
}

void Watchdog::warn_if_stalled() {
  auto op = recorder_.running();
  if (!op || op->started_us == 0) return;
  if (op->id != warned_id_) {
    warned_id_ = op->id;
    warnings_ = 0;
  }
  double waited_s = static_cast<double>(now_us() - op->started_us) / 1e6;
  double next_s = static_cast<double>(stall_.count()) / 1e3 * (warnings_ + 1);
  if (waited_s < next_s) return;
  ++warnings_;
  std::string detail = op->collective() ? statuses_text(op->seq, true, "") : std::string();
  log_warning(op->label(), " waiting ", seconds_text(waited_s), " s", detail, " (group '",
              options_.group, "')");
}

std::string Watchdog::timeout_summary(const Op& op) {
  publish_if_changed(false);
  auto rec = recorder_.find(op.record_id);
  std::string label = rec ? rec->summary() : op.name();
  double waited_s = 0;
  if (rec && rec->started_us > 0)
    waited_s =
        static_cast<double>((rec->ended_us > 0 ? rec->ended_us : now_us()) - rec->started_us) / 1e6;
  // Every rank that gave up waiting in it blames the ranks that never entered it.
  std::string what, statuses = statuses_text(op.seq, false, label);
  if (op.deadline.expired()) {
    what =
        detail::concat(" timed out after ", seconds_text(waited_s), " s on rank ", options_.rank);
  } else if (waited_s <
             0.1 * (waited_s + static_cast<double>(op.deadline.remaining().count()) / 1e3)) {
    // Failed at once with a peer's timeout: the others had waited for this rank and given up.
    what = detail::concat(" failed on rank ", options_.rank,
                          " as soon as it entered it: another "
                          "rank had already timed out in it, so rank ",
                          options_.rank,
                          " came too late (it spent longer than the timeout before this op)");
    if (size_t at = statuses.find(kSummaryMark); at != std::string::npos)
      statuses = statuses.substr(at + 2);  // "every rank entered it" is no news here
  } else {
    what = detail::concat(" failed on rank ", options_.rank, " after ", seconds_text(waited_s),
                          " s, when another rank timed out in it");
  }
  return label + what + ": " + statuses;
}

std::string Watchdog::explain_failure(const Op& op, const std::string& what, bool timed_out) {
  std::string message = what;
  try {
    if (timed_out && !is_p2p(op.kind) && what.find(kSummaryMark) == std::string::npos)
      message = timeout_summary(op) + ". " + what;
  } catch (const std::exception& e) {
    message += detail::concat(" (could not read the ranks' status: ", e.what(), ")");
  }
  message += message.ends_with('.') ? " " : ". ";
  try {
    message += "Flight recorder dump: " + dump(message);
  } catch (const std::exception& e) {
    message += detail::concat("No flight recorder dump: ", e.what());
  }
  return message;
}

std::string Watchdog::dump(const std::string& reason) const {
  Dump d{.group = options_.group,
         .rank = options_.rank,
         .size = options_.size,
         .global_rank = options_.global_rank,
         .host = options_.host,
         .pid = static_cast<int>(::getpid()),
         .backend = options_.backend,
         .reason = reason,
         .dumped_us = now_us(),
         .capacity = recorder_.capacity(),
         .recorded = recorder_.recorded(),
         .progress = recorder_.progress(),
         .ops = recorder_.snapshot()};
  return write_dump(d, options_.trace_dir);
}

}  // namespace lockstep::debug
