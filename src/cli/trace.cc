// lockstep trace [DIR] [-o FILE]: merges the flight-recorder dumps in DIR into one Chrome trace /
// Perfetto JSON and prints a verdict (see docs/diagnostics.md and src/debug/trace_merge.h).
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "debug/trace_merge.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"

namespace lockstep::cli {
namespace {

constexpr const char* kUsage =
    "usage: lockstep trace [DIR] [-o FILE]\n"
    "\n"
    "Merges the flight-recorder dumps that a failed job's ranks wrote into DIR (default:\n"
    "LOCKSTEP_TRACE_DIR, else ./lockstep-trace) into one Chrome trace / Perfetto timeline, one\n"
    "track per rank, and prints a verdict: the op the job stalled on, the ranks behind, ops that\n"
    "differ across ranks, and failed ops.\n"
    "\n"
    "  -o, --output FILE   where to write the timeline (default DIR/trace.json)\n"
    "  -h, --help          this text\n"
    "\n"
    "Open the timeline at https://ui.perfetto.dev or chrome://tracing.\n";

struct TraceArgs {
  std::string dir;
  std::string output;
  bool help = false;
};

// Throws InvalidArgument on a bad command line.
TraceArgs parse_args(int argc, char** argv) {
  TraceArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      a.help = true;
    } else if (arg == "-o" || arg == "--output") {
      LOCKSTEP_ENFORCE(i + 1 < argc, InvalidArgument, arg, " needs a file name");
      a.output = argv[++i];
    } else if (arg.rfind("--output=", 0) == 0) {
      a.output = std::string(arg.substr(9));
    } else if (!arg.empty() && arg[0] == '-') {
      throw InvalidArgument(detail::concat("unknown option ", arg));
    } else {
      LOCKSTEP_ENFORCE(a.dir.empty(), InvalidArgument, "one directory only (got ", a.dir, " and ",
                       arg, ")");
      a.dir = std::string(arg);
    }
  }
  if (a.dir.empty()) a.dir = settings().trace_dir;
  if (a.output.empty()) a.output = a.dir + "/trace.json";
  return a;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  LOCKSTEP_ENFORCE(static_cast<bool>(out), Error, "cannot write ", path);
}

}  // namespace

int trace_command(int argc, char** argv) {
  TraceArgs args;
  try {
    args = parse_args(argc, argv);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "lockstep trace: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  if (args.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  debug::LoadedDumps loaded = debug::load_dumps(args.dir);
  for (const std::string& p : loaded.problems)
    std::fprintf(stderr, "lockstep trace: skipped %s\n", p.c_str());
  if (loaded.dumps.empty()) {
    std::fprintf(stderr,
                 "lockstep trace: no flight-recorder dumps in %s. Ranks write them there when an "
                 "op times out or fails (LOCKSTEP_TRACE_DIR sets the directory)\n",
                 args.dir.c_str());
    return 1;
  }
  std::string verdict = debug::trace_verdict(loaded.dumps);
  write_text(args.output, debug::chrome_trace(loaded.dumps, verdict));
  std::printf("lockstep trace: %zu dumps merged into %s (open it at https://ui.perfetto.dev)\n%s",
              loaded.dumps.size(), args.output.c_str(), verdict.c_str());
  return 0;
}

}  // namespace lockstep::cli
