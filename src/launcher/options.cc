// Command-line parsing for `lockstep run`: one table drives both the parser and --help.
#include "launcher/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "core/host_cores.h"

namespace lockstep::launcher {
namespace {

using std::chrono::milliseconds;

int parse_int(std::string_view option, std::string_view text, int min, int max) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw UsageError(detail::concat("--", option, ": '", text, "' is not a whole number"));
  if (value < min || value > max)
    throw UsageError(detail::concat("--", option, " ", value,
                                    " is out of range: give a number in [", min, ", ", max, "]"));
  return value;
}

milliseconds parse_seconds(std::string_view option, std::string_view text) {
  std::string copy(text);
  char* end = nullptr;
  double seconds = std::strtod(copy.c_str(), &end);
  if (copy.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > 1e7)
    throw UsageError(
        detail::concat("--", option, ": '", text, "' is not a number of seconds (e.g. 30 or 0.5)"));
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

Streams parse_streams(std::string_view option, std::string_view text) {
  return static_cast<Streams>(parse_int(option, text, 0, 3));
}

// "3" (every local rank) or "0:3,1:2" (per local rank).
StreamSelection parse_selection(std::string_view option, std::string_view text) {
  StreamSelection selection;
  if (text.find(':') == std::string_view::npos) {
    selection.all = parse_streams(option, text);
    return selection;
  }
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto colon = item.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(
          detail::concat("--", option, ": '", item, "' is not LOCAL_RANK:STREAMS (e.g. 0:3,1:2)"));
    int rank = parse_int(option, item.substr(0, colon), 0, 1 << 20);
    selection.per_local_rank[rank] = parse_streams(option, item.substr(colon + 1));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return selection;
}

std::set<int> parse_rank_list(std::string_view option, std::string_view text) {
  std::set<int> ranks;
  while (!text.empty()) {
    auto comma = text.find(',');
    ranks.insert(parse_int(option, text.substr(0, comma), 0, 1 << 20));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (ranks.empty()) throw UsageError(detail::concat("--", option, " needs at least one rank"));
  return ranks;
}

// --nnodes N, or MIN:MAX (elastic).
void parse_nnodes(LaunchOptions& o, std::string_view v) {
  constexpr int kMaxNodes = 1 << 16;
  auto colon = v.find(':');
  if (colon == std::string_view::npos) {
    o.nnodes = o.nnodes_min = o.nnodes_max = parse_int("nnodes", v, 1, kMaxNodes);
    o.elastic = false;
    return;
  }
  std::string_view min = v.substr(0, colon), max = v.substr(colon + 1);
  if (min.empty() || max.empty())
    throw UsageError(detail::concat("--nnodes: '", v, "' lacks ", min.empty() ? "MIN" : "MAX",
                                    "; give N or MIN:MAX (e.g. 2:4)"));
  auto bound = [&](std::string_view which, std::string_view text) {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
      throw UsageError(detail::concat("--nnodes ", v, ": ", which, " '", text,
                                      "' is not a whole number; give N or MIN:MAX (e.g. 2:4)"));
    if (value < 1 || value > kMaxNodes)
      throw UsageError(detail::concat("--nnodes ", v, ": ", which, " ", value,
                                      " is out of range: give a number in [1, ", kMaxNodes, "]"));
    return value;
  };
  o.nnodes_min = bound("MIN", min);
  o.nnodes_max = bound("MAX", max);
  if (o.nnodes_min > o.nnodes_max)
    throw UsageError(detail::concat("--nnodes ", v, ": MIN ", o.nnodes_min, " is larger than MAX ",
                                    o.nnodes_max, " (give MIN:MAX with MIN <= MAX)"));
  o.nnodes = o.nnodes_max;
  o.elastic = true;
}

struct OptionSpec {
  const char* name;
  const char* value_name;  // nullptr: a flag without a value
  const char* help;
  void (*apply)(LaunchOptions&, std::string_view value);
};

constexpr OptionSpec kOptions[] = {
    {"nproc-per-node", "N|auto",
     "processes to start on this node; auto = number of CPU cores (default 1)",
     [](LaunchOptions& o, std::string_view v) {
       o.nproc_per_node = v == "auto" ? detail::process_cores() : parse_int("nproc-per-node", v, 1, 1 << 16);
     }},
    {"nnodes", "N|MIN:MAX",
     "number of nodes in the job, each running this same command (default 1); MIN:MAX is an "
     "elastic job: it starts once MIN nodes are there, takes up to MAX, and re-forms when nodes "
     "leave or arrive (node ranks are then assigned, --node-rank is ignored)",
     [](LaunchOptions& o, std::string_view v) { parse_nnodes(o, v); }},
    {"node-rank", "R", "this node's rank in [0, nnodes) (default 0)",
     [](LaunchOptions& o, std::string_view v) {
       o.node_rank = parse_int("node-rank", v, 0, 1 << 16);
     }},
    {"master-addr", "HOST",
     "address of node 0, whose launcher hosts the store and whose rank 0 hosts the script's "
     "(default 127.0.0.1)",
     [](LaunchOptions& o, std::string_view v) { o.master_addr = std::string(v); }},
    {"master-port", "PORT",
     "port of the launcher's store on node 0 (LOCKSTEP_STORE_PORT); 0 picks a free one (one node "
     "only; default 29500). MASTER_PORT is another, free port",
     [](LaunchOptions& o, std::string_view v) {
       o.master_port = parse_int("master-port", v, 0, 65535);
     }},
    {"standalone", nullptr, "single-node job on 127.0.0.1 with a free port",
     [](LaunchOptions& o, std::string_view) { o.standalone = true; }},
    {"max-restarts", "K", "restart the whole local group up to K times after a failure (default 0)",
     [](LaunchOptions& o, std::string_view v) {
       o.max_restarts = parse_int("max-restarts", v, 0, 1 << 20);
     }},
    {"monitor-interval", "SECONDS", "how often children and other nodes are checked (default 0.1)",
     [](LaunchOptions& o, std::string_view v) {
       o.monitor_interval = std::max(milliseconds(1), parse_seconds("monitor-interval", v));
     }},
    {"rdzv-timeout", "SECONDS", "how long nodes wait for each other at each attempt (default 300)",
     [](LaunchOptions& o, std::string_view v) {
       o.rdzv_timeout = parse_seconds("rdzv-timeout", v);
     }},
    {"rdzv-last-call", "SECONDS",
     "elastic jobs: once MIN nodes are there, wait this long for more before starting (each "
     "arrival restarts the wait; default 1)",
     [](LaunchOptions& o, std::string_view v) {
       o.rdzv_last_call = parse_seconds("rdzv-last-call", v);
     }},
    {"rdzv-keep-alive", "SECONDS",
     "elastic jobs: a node whose launcher has not renewed its lease in the store for this long is "
     "gone, and the others re-form without it (default 15)",
     [](LaunchOptions& o, std::string_view v) {
       o.rdzv_keep_alive = std::max(milliseconds(100), parse_seconds("rdzv-keep-alive", v));
     }},
    {"term-timeout", "SECONDS",
     "grace period between SIGTERM and SIGKILL when stopping ranks (default 10)",
     [](LaunchOptions& o, std::string_view v) {
       o.term_timeout = parse_seconds("term-timeout", v);
     }},
    {"secret-file", "PATH",
     "the job's secret, which every connection of the job must prove it knows (the same file on "
     "every node; default: LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE, else a random one for a "
     "one-node job)",
     [](LaunchOptions& o, std::string_view v) { o.secret_file = std::string(v); }},
    {"bind-addr", "ADDR",
     "the address the launcher's store and every rank's listeners bind (default: the address "
     "each advertises, when this host has it: loopback for --standalone; else every interface)",
     [](LaunchOptions& o, std::string_view v) { o.bind_addr = std::string(v); }},
    {"run-id", "ID", "job id given to every rank as LOCKSTEP_RUN_ID (default: node 0 picks one)",
     [](LaunchOptions& o, std::string_view v) { o.run_id = std::string(v); }},
    {"log-dir", "DIR", "write each rank's output to DIR/attempt_N/rank_R.log, per attempt",
     [](LaunchOptions& o, std::string_view v) { o.log_dir = std::string(v); }},
    {"tee", "S",
     "also copy streams S to the log files: 0 none, 1 stdout, 2 stderr, 3 both; or 0:3,1:1 per "
     "local rank",
     [](LaunchOptions& o, std::string_view v) { o.tee = parse_selection("tee", v); }},
    {"redirects", "S",
     "send streams S to the log files only, not the console (values as for --tee)",
     [](LaunchOptions& o, std::string_view v) { o.redirects = parse_selection("redirects", v); }},
    {"local-ranks-filter", "R,R,...",
     "show only these local ranks' output on the console (files get all)",
     [](LaunchOptions& o, std::string_view v) {
       o.local_ranks_filter = parse_rank_list("local-ranks-filter", v);
     }},
    {"module", nullptr,
     "run PROGRAM as a Python module (python3 -u -m PROGRAM ARGS...), as torchrun -m does",
     [](LaunchOptions& o, std::string_view) { o.module = true; }},
    {"no-python", nullptr, "run PROGRAM as given, even a .py file, instead of with the interpreter",
     [](LaunchOptions& o, std::string_view) { o.no_python = true; }},
    {"python", "PATH",
     "the interpreter for a .py script or -m (default: $LOCKSTEP_PYTHON, else python3 in PATH)",
     [](LaunchOptions& o, std::string_view v) { o.python = std::string(v); }},
    {"help", nullptr, "print this help and exit",
     [](LaunchOptions& o, std::string_view) { o.help = true; }},
};

const OptionSpec* find_option(std::string_view name) {
  for (const auto& spec : kOptions)
    if (name == spec.name) return &spec;
  return nullptr;
}

// Normalises "--nproc_per_node=4" into name "nproc-per-node" and value "4".
void split_option(std::string_view arg, std::string& name, std::optional<std::string>& value) {
  arg.remove_prefix(arg.starts_with("--") ? 2 : 1);
  auto eq = arg.find('=');
  name = std::string(arg.substr(0, eq));
  for (char& c : name)
    if (c == '_') c = '-';
  if (eq != std::string_view::npos) value = std::string(arg.substr(eq + 1));
}

}  // namespace

Streams StreamSelection::for_local_rank(int local_rank) const {
  auto it = per_local_rank.find(local_rank);
  return it == per_local_rank.end() ? all : it->second;
}

LaunchOptions parse_launch_options(std::span<const std::string> args) {
  LaunchOptions options;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    std::string name;
    std::optional<std::string> value;
    split_option(arg, name, value);
    if (name == "h") name = "help";
    if (name == "m") name = "module";
    const OptionSpec* spec = find_option(name);
    if (!spec)
      throw UsageError(
          detail::concat("unknown option '", arg, "'; see 'lockstep run --help' for the options"));
    if (spec->value_name && !value) {
      if (i + 1 >= args.size())
        throw UsageError(detail::concat("--", name, " needs a value (", spec->value_name, ")"));
      value = args[++i];
    }
    if (!spec->value_name && value)
      throw UsageError(detail::concat("--", name, " takes no value (got '", *value, "')"));
    spec->apply(options, value.value_or(""));
  }
  options.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return options;
}

std::string launch_help() {
  std::string text =
      "usage: lockstep run [options] [--] PROGRAM [ARGS...]\n"
      "       lockstep run [options] script.py [ARGS...]      (python3 -u script.py ARGS...)\n"
      "       lockstep run [options] -m module [ARGS...]      (python3 -u -m module ARGS...)\n\n"
      "Starts --nproc-per-node copies of PROGRAM on this node and supervises them. Each gets\n"
      "torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
      "GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT,\n"
      "TORCHELASTIC_*) and lockstep's (LOCKSTEP_STORE_ADDR, LOCKSTEP_STORE_PORT, "
      "LOCKSTEP_RUN_ID,\n"
      "LOCKSTEP_RESTART_COUNT, ...). MASTER_PORT is a free port for the script's own store,\n"
      "which its rank 0 hosts; the launcher's store is at LOCKSTEP_STORE_ADDR:"
      "LOCKSTEP_STORE_PORT.\n\n"
      "options:\n";
  for (const auto& spec : kOptions) {
    std::string left = std::string("  --") + spec.name;
    if (spec.value_name) left += std::string(" ") + spec.value_name;
    if (left.size() < 30)
      left.resize(30, ' ');
    else
      left += "  ";
    text += left + spec.help + "\n";
  }
  return text;
}

}  // namespace lockstep::launcher
