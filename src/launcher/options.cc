// Command-line parsing for `lockstep run`: the options are declared to CLI11, and the one
// declaration drives both the parser and --help. What a value means is in option_values.h.
#include "launcher/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <memory>

#include "core/host_cores.h"
#include "launcher/help_formatter.h"
#include "launcher/option_values.h"

namespace lockstep::launcher {
namespace {

using std::chrono::milliseconds;

constexpr const char* kDescription =
    "usage: lockstep run [options] [--] PROGRAM [ARGS...]\n"
    "       lockstep run [options] script.py [ARGS...]      (python3 -u script.py ARGS...)\n"
    "       lockstep run [options] -m module [ARGS...]      (python3 -u -m module ARGS...)\n\n"
    "Starts --nproc-per-node copies of PROGRAM on this node and supervises them. Each gets\n"
    "torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
    "GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT,\n"
    "TORCHELASTIC_*) and lockstep's (LOCKSTEP_STORE_ADDR, LOCKSTEP_STORE_PORT, LOCKSTEP_RUN_ID,\n"
    "LOCKSTEP_RESTART_COUNT, ...). MASTER_PORT is a free port for the script's own store,\n"
    "which its rank 0 hosts; the launcher's store is at LOCKSTEP_STORE_ADDR:LOCKSTEP_STORE_PORT.\n";

// The option's names for CLI11: --name and every spelling with '_' for some of its '-'
// (--nproc_per_node, as torchrun accepts). --help lists the first.
std::string spellings(std::string_view name) {
  std::vector<std::string> names{std::string(name)};
  for (size_t i = 0; i < name.size(); ++i)
    if (name[i] == '-')
      for (size_t j = 0, n = names.size(); j < n; ++j) {
        names.push_back(names[j]);
        names.back()[i] = '_';
      }
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "--" : ",--") + n;
  return list;
}

// CLI11 cannot tell "--name=" (an empty value) from "--name" (split_long gives "" for both), and
// would take the next argument, often the program, for the value. So "--name=" reaches CLI11 as
// "--name=" kEmptyValue, a marker no command line has, and is read back as "".
constexpr std::string_view kEmptyValue = "\x1f<empty>";

std::string read_back(const std::string& given) {
  return given == kEmptyValue ? std::string() : given;
}

// An option with a value: apply converts the text (throwing UsageError) and stores it. It runs
// as the option is read, so that the first bad value on the command line is the one reported.
void value(CLI::App& app, std::string_view name, std::string value_name, std::string help,
           std::function<void(const std::string&)> apply) {
  app.add_option_function<std::string>(
         spellings(name), [apply = std::move(apply)](const std::string& v) { apply(read_back(v)); },
         std::move(help))
      ->type_name(std::move(value_name))
      ->trigger_on_parse();
}

// A flag. CLI11 would take "--flag=VALUE" as a value for it; a flag takes none.
void flag(CLI::App& app, std::string names, std::string help, bool& target) {
  CLI::Option* option = app.add_flag(std::move(names), target, std::move(help));
  option
      ->check([name = option->get_name()](const std::string& given) {
        if (given != "true")
          throw UsageError(detail::concat(name, " takes no value (got '", read_back(given), "')"));
        return std::string();
      })
      ->trigger_on_parse();
}

void declare_options(CLI::App& app, LaunchOptions& o) {
  value(app, "nproc-per-node", "N|auto",
        "processes to start on this node; auto = number of CPU cores (default 1)",
        [&o](const std::string& v) {
          o.nproc_per_node =
              v == "auto" ? detail::process_cores() : parse_int("nproc-per-node", v, 1, 1 << 16);
        });
  value(app, "nnodes", "N|MIN:MAX",
        "number of nodes in the job, each running this same command (default 1); MIN:MAX is an "
        "elastic job: it starts once MIN nodes are there, takes up to MAX, and re-forms when "
        "nodes leave or arrive (node ranks are then assigned, --node-rank is ignored)",
        [&o](const std::string& v) { parse_nnodes(o, v); });
  value(app, "node-rank", "R", "this node's rank in [0, nnodes) (default 0)",
        [&o](const std::string& v) { o.node_rank = parse_int("node-rank", v, 0, 1 << 16); });
  value(app, "master-addr", "HOST",
        "address of node 0, whose launcher hosts the store and whose rank 0 hosts the script's "
        "(default 127.0.0.1)",
        [&o](const std::string& v) { o.master_addr = v; });
  value(app, "master-port", "PORT",
        "port of the launcher's store on node 0 (LOCKSTEP_STORE_PORT); 0 picks a free one (one "
        "node only; default 29500). MASTER_PORT is another, free port",
        [&o](const std::string& v) { o.master_port = parse_int("master-port", v, 0, 65535); });
  flag(app, spellings("standalone"), "single-node job on 127.0.0.1 with a free port", o.standalone);
  value(app, "max-restarts", "K",
        "restart the whole local group up to K times after a failure (default 0)",
        [&o](const std::string& v) { o.max_restarts = parse_int("max-restarts", v, 0, 1 << 20); });
  value(app, "monitor-interval", "SECONDS",
        "how often children and other nodes are checked (default 0.1)", [&o](const std::string& v) {
          o.monitor_interval = std::max(milliseconds(1), parse_seconds("monitor-interval", v));
        });
  value(app, "rdzv-timeout", "SECONDS",
        "how long nodes wait for each other at each attempt (default 300)",
        [&o](const std::string& v) { o.rdzv_timeout = parse_seconds("rdzv-timeout", v); });
  value(app, "rdzv-last-call", "SECONDS",
        "elastic jobs: once MIN nodes are there, wait this long for more before starting (each "
        "arrival restarts the wait; default 1)",
        [&o](const std::string& v) { o.rdzv_last_call = parse_seconds("rdzv-last-call", v); });
  value(app, "rdzv-keep-alive", "SECONDS",
        "elastic jobs: a node whose launcher has not renewed its lease in the store for this "
        "long is gone, and the others re-form without it (default 15)",
        [&o](const std::string& v) {
          o.rdzv_keep_alive = std::max(milliseconds(100), parse_seconds("rdzv-keep-alive", v));
        });
  value(app, "term-timeout", "SECONDS",
        "grace period between SIGTERM and SIGKILL when stopping ranks (default 10)",
        [&o](const std::string& v) { o.term_timeout = parse_seconds("term-timeout", v); });
  value(app, "secret-file", "PATH",
        "the job's secret, which every connection of the job must prove it knows (the same file "
        "on every node; default: LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE, else a random one for "
        "a one-node job)",
        [&o](const std::string& v) { o.secret_file = v; });
  value(app, "bind-addr", "ADDR",
        "the address the launcher's store and every rank's listeners bind (default: the address "
        "each advertises, when this host has it: loopback for --standalone; else every "
        "interface)",
        [&o](const std::string& v) { o.bind_addr = v; });
  value(app, "run-id", "ID",
        "job id given to every rank as LOCKSTEP_RUN_ID (default: node 0 picks one)",
        [&o](const std::string& v) { o.run_id = v; });
  value(app, "log-dir", "DIR", "write each rank's output to DIR/attempt_N/rank_R.log, per attempt",
        [&o](const std::string& v) { o.log_dir = v; });
  value(app, "tee", "S",
        "also copy streams S to the log files: 0 none, 1 stdout, 2 stderr, 3 both; or 0:3,1:1 "
        "per local rank",
        [&o](const std::string& v) { o.tee = parse_selection("tee", v); });
  value(app, "redirects", "S",
        "send streams S to the log files only, not the console (values as for --tee)",
        [&o](const std::string& v) { o.redirects = parse_selection("redirects", v); });
  value(app, "local-ranks-filter", "R,R,...",
        "show only these local ranks' output on the console (files get all)",
        [&o](const std::string& v) {
          o.local_ranks_filter = parse_rank_list("local-ranks-filter", v);
        });
  flag(app, "-m," + spellings("module") + ",--m",
       "run PROGRAM as a Python module (python3 -u -m PROGRAM ARGS...), as torchrun -m does",
       o.module);
  flag(app, spellings("no-python"),
       "run PROGRAM as given, even a .py file, instead of with the interpreter", o.no_python);
  value(app, "python", "PATH",
        "the interpreter for a .py script or -m (default: $LOCKSTEP_PYTHON, else python3 in "
        "PATH)",
        [&o](const std::string& v) { o.python = v; });
  flag(app, "-h,--help,--h", "print this help and exit", o.help);
}

// The parser of `lockstep run`, storing into o. The program and its arguments are what CLI11
// leaves over (prefix_command: everything from the first argument that is not an option on).
std::unique_ptr<CLI::App> launch_app(LaunchOptions& o) {
  auto app = std::make_unique<CLI::App>(kDescription, "lockstep run");
  app->set_help_flag();  // --help is declared with the others, and listed last
  app->prefix_command();
  app->formatter(std::make_shared<HelpFormatter>(30, false));
  declare_options(*app, o);
  return app;
}

}  // namespace

Streams StreamSelection::for_local_rank(int local_rank) const {
  auto it = per_local_rank.find(local_rank);
  return it == per_local_rank.end() ? all : it->second;
}

LaunchOptions parse_launch_options(std::span<const std::string> args) {
  LaunchOptions options;
  auto app = launch_app(options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  for (std::string& arg : reversed)
    if (arg.size() > 2 && arg.starts_with("--") && arg.back() == '=') arg += kEmptyValue;
  try {
    app->parse(std::move(reversed));
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 ran out of arguments for an option's value, so that option is the last argument.
    const std::string& last = args.back();
    const CLI::Option* option = app->get_option_no_throw(last.substr(0, last.find('=')));
    if (!option) throw UsageError(e.what());
    throw UsageError(
        detail::concat(option->get_name(), " needs a value (", option->get_type_name(), ")"));
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  // What CLI11 leaves: "--" then the program, an option it does not know, or the program.
  std::vector<std::string> rest = app->remaining();
  for (std::string& arg : rest)
    if (arg.ends_with(kEmptyValue)) arg.resize(arg.size() - kEmptyValue.size());
  if (!rest.empty() && rest.front() == "--")
    rest.erase(rest.begin());
  else if (!rest.empty() && rest.front().size() > 1 && rest.front().front() == '-')
    throw UsageError(detail::concat("unknown option '", rest.front(),
                                    "'; see 'lockstep run --help' for the options"));
  options.program = std::move(rest);
  return options;
}

std::string launch_help() {
  LaunchOptions options;
  return launch_app(options)->help();
}

}  // namespace lockstep::launcher
