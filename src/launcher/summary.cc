#include "launcher/summary.h"

#include <signal.h>

#include <algorithm>
#include <ctime>

#include "launcher/signals.h"
#include "lockstep/core/error.h"

namespace lockstep::launcher {
namespace {

constexpr const char* kRule =
    "======================================================================\n";

std::string format_time(std::chrono::system_clock::time_point t) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char date[32], zone[8], text[64];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &local);
  std::strftime(zone, sizeof(zone), "%z", &local);
  std::snprintf(text, sizeof(text), "%s.%03d %s", date, static_cast<int>(ms), zone);
  return text;
}

std::string how_it_ended(const RankExit& exit) {
  if (exit.signal == 0) return "exited with code " + std::to_string(exit.exit_code);
  if (exit.signal == SIGABRT)
    return "was killed by SIGABRT (it aborted itself: an uncaught exception or a failed "
           "assertion)";
  if (exit.died_by_itself()) return "was killed by " + signal_name(exit.signal) + " (it crashed)";
  return "was killed by " + signal_name(exit.signal);
}

// For the root cause: a SIGKILL nobody in the launcher sent is most often the OOM killer.
std::string how_it_ended_with_hint(const RankExit& exit) {
  std::string text = how_it_ended(exit);
  if (exit.signal == SIGKILL && !exit.stopped_by_launcher)
    text += " (often the out-of-memory killer: check dmesg)";
  return text;
}

// Time, host, rank, pid, how it ended, what it died of, its last stderr lines.
void append_rank_details(std::string& out, const RankExit& exit, const std::string& host,
                         bool with_headline = true) {
  if (with_headline && !exit.headline.empty()) out += "  error:      " + exit.headline + "\n";
  out += detail::concat("  time:       ", format_time(exit.time), "\n", "  host:       ", host,
                        "\n", "  rank:       ", exit.rank, " (local rank ", exit.local_rank, ")\n",
                        "  pid:        ", exit.pid, "\n",
                        "  exit:       ", how_it_ended_with_hint(exit),
                        exit.stopped_by_launcher ? " after the launcher stopped it" : "", "\n");
  if (!exit.error_file.empty()) out += "  error file: " + exit.error_file + "\n";
  if (exit.stderr_tail.empty()) {
    out += "  stderr:     (nothing)\n";
    return;
  }
  out += detail::concat("  last ", exit.stderr_tail.size(), " line(s) of its stderr:\n");
  for (const auto& line : exit.stderr_tail) out += "    " + line + "\n";
}

// What a failed rank died of, for its one-line description (which is also what the other nodes
// of the job get): its headline, else, for a rank that exited with an error code on its own, the
// last line it wrote to stderr (a C++ program that printed its error and returned).
std::string died_of(const RankExit& exit) {
  if (!exit.headline.empty()) return ": " + exit.headline;
  if (exit.signal != 0 || exit.exit_code == 0 || exit.stopped_by_launcher) return "";
  for (auto line = exit.stderr_tail.rbegin(); line != exit.stderr_tail.rend(); ++line)
    if (line->find_first_not_of(" \t\r") != std::string::npos)
      return "; its last stderr line: " + *line;
  return "";
}

std::string rank_words(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

bool contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// The ranks' diagnoses blame other ranks than the first to fail: lead with those.
void append_culprit(std::string& out, const AttemptResult& last, const Culprit& culprit) {
  out +=
      detail::concat("root cause (named by the ranks' own diagnoses): ", rank_words(culprit.ranks),
                     " never entered ", culprit.op, "; ", rank_words(culprit.waiting_ranks),
                     " timed out waiting for it\n");
  for (const auto& exit : last.other_failures) {
    if (!contains(culprit.ranks, exit.rank)) continue;
    out += detail::concat("culprit rank ", exit.rank, ":\n");
    append_rank_details(out, exit, last.host);
  }
}

void append_cause(std::string& out, const AttemptResult& last, const SummaryContext& context) {
  switch (last.end) {
    case AttemptEnd::failed:
      if (last.culprit && !contains(last.culprit->ranks, last.root_cause->rank)) {
        append_culprit(out, last, *last.culprit);
        out += "first failure (a consequence):\n";
        append_rank_details(out, *last.root_cause, last.host);
        break;
      }
      // The headline: what the rank died of (a Python exception and where), when known.
      out += last.root_cause->headline.empty()
                 ? std::string("root cause (first failure):\n")
                 : "root cause (first failure): " + last.root_cause->headline + "\n";
      append_rank_details(out, *last.root_cause, last.host, false);
      break;
    case AttemptEnd::remote_failed:
      out += detail::concat("root cause: node ", last.remote->node_rank,
                            " failed: ", last.remote->what,
                            "\n  (its launcher's summary has the details; ", "node ",
                            context.node_rank, "'s ranks were stopped)\n");
      if (last.culprit)
        out +=
            detail::concat("  the ranks' own diagnoses: ", rank_words(last.culprit->ranks),
                           " never entered ", last.culprit->op, "; ",
                           rank_words(last.culprit->waiting_ranks), " timed out waiting for it\n");
      break;
    case AttemptEnd::interrupted:
      out += detail::concat("root cause: the launcher on ", last.host, " (node ", context.node_rank,
                            ") received ", signal_name(last.signal),
                            " and forwarded it to every rank\n");
      break;
    case AttemptEnd::succeeded:
      break;
  }
}

void append_attempts(std::string& out, const std::vector<AttemptResult>& attempts,
                     const SummaryContext& context) {
  out += detail::concat("attempts (run id ", context.run_id, ", --max-restarts ",
                        context.max_restarts, "):\n");
  for (const auto& a : attempts)
    out += detail::concat("  attempt ", a.attempt, ": ", describe_attempt(a),
                          a.membership.empty() ? "" : " (" + a.membership + ")", "\n");
}

}  // namespace

std::string describe_attempt(const AttemptResult& a) {
  switch (a.end) {
    case AttemptEnd::succeeded:
      return "succeeded";
    case AttemptEnd::failed:
      if (a.culprit && !contains(a.culprit->ranks, a.root_cause->rank))
        return detail::concat(rank_words(a.culprit->ranks), " never entered ", a.culprit->op,
                              " (rank ", a.root_cause->rank, " ", how_it_ended(*a.root_cause),
                              " first, on ", a.host, ")");
      return detail::concat("rank ", a.root_cause->rank, " (local rank ", a.root_cause->local_rank,
                            ") ", how_it_ended(*a.root_cause), " on ", a.host,
                            died_of(*a.root_cause));
    case AttemptEnd::remote_failed:
      return detail::concat("node ", a.remote->node_rank, " failed: ", a.remote->what);
    case AttemptEnd::interrupted:
      return "interrupted by " + signal_name(a.signal);
  }
  return "";
}

int failure_exit_code(const AttemptResult& a) {
  switch (a.end) {
    case AttemptEnd::failed:
      return a.root_cause->status_code();
    case AttemptEnd::remote_failed:
      return a.remote->exit_code;
    case AttemptEnd::interrupted:
      return 128 + a.signal;
    case AttemptEnd::succeeded:
      return 0;
  }
  return 1;
}

std::string format_failure_summary(const std::vector<AttemptResult>& attempts,
                                   const SummaryContext& context) {
  const AttemptResult& last = attempts.back();
  std::string out = kRule;
  out += detail::concat("lockstep run: the job failed (node ", context.node_rank, ", attempt ",
                        last.attempt, ")\n");
  append_cause(out, last, context);
  if (!last.other_failures.empty()) out += "other failed ranks:\n";
  for (const auto& exit : last.other_failures)
    out += detail::concat("  rank ", exit.rank, " (local rank ", exit.local_rank, ", pid ",
                          exit.pid, ") ", how_it_ended(exit),
                          exit.stopped_by_launcher ? " after the launcher stopped it" : "", "\n");
  append_attempts(out, attempts, context);
  out += detail::concat("exit code: ", failure_exit_code(last), "\n", kRule);
  return out;
}

std::string format_success_summary(const std::vector<AttemptResult>& attempts,
                                   const SummaryContext& context) {
  if (attempts.size() <= 1) return "";
  // An elastic attempt that ended for a membership change is no restart (it does not count
  // against --max-restarts either).
  const auto changes = std::count_if(attempts.begin(), attempts.end() - 1, [](const auto& a) {
    return a.end == AttemptEnd::remote_failed && a.remote && a.remote->membership_change;
  });
  const auto restarts = static_cast<long>(attempts.size() - 1) - changes;
  std::string out = detail::concat(
      "lockstep run: the job succeeded on attempt ", attempts.back().attempt, " after ", restarts,
      " restart(s)", changes ? detail::concat(" and ", changes, " membership change(s)") : "",
      "\n");
  append_attempts(out, attempts, context);
  return out;
}

}  // namespace lockstep::launcher
