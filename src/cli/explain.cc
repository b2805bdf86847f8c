// lockstep explain [FILE|-]: reads a log of PyTorch, NCCL, Gloo or lockstep and, for every known
// failure signature in it, prints the matched lines, the likely causes (most likely first) and
// the fix. The signatures come from a data file (cli/explain_signatures.h).
//
// Exit codes: 0 when at least one signature matched, 1 when none did, 2 for a usage error, an
// unreadable log, or a signatures file that cannot be found or parsed.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/explain_match.h"
#include "cli/explain_report.h"
#include "cli/explain_signatures.h"
#include "lockstep/core/error.h"

namespace lockstep::cli {
namespace {

constexpr int kExplained = 0, kNothingMatched = 1, kUsageError = 2;

constexpr const char* kUsage =
    "usage: lockstep explain [options] [FILE|-]\n"
    "\n"
    "Reads a log (FILE, or standard input for - or no FILE) of PyTorch, NCCL, Gloo or lockstep\n"
    "and explains every known failure in it: the matched lines, the likely causes (most likely\n"
    "first) and the fix, the most specific problem first.\n"
    "\n"
    "options:\n"
    "  --signatures FILE   read the signatures from FILE (default: LOCKSTEP_EXPLAIN_SIGNATURES,\n"
    "                      else the explain_signatures.txt installed with lockstep)\n"
    "  --list              list the known signatures and exit\n"
    "  --help              this text\n"
    "\n"
    "exit code: 0 something was explained, 1 nothing matched, 2 usage or file error\n";

struct ExplainOptions {
  std::string log_path;  // "" or "-": standard input
  std::string signatures_path;
  bool list = false;
  bool help = false;
};

ExplainOptions parse_options(int argc, char** argv) {
  ExplainOptions o;
  bool have_log = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--signatures" || a.rfind("--signatures=", 0) == 0) {
      if (a == "--signatures" && i + 1 >= argc) throw ConfigError("--signatures needs a FILE");
      o.signatures_path = a == "--signatures" ? argv[++i] : std::string(a.substr(13));
    } else if (a.size() > 1 && a[0] == '-') {
      throw ConfigError("unknown option '" + std::string(a) + "'");
    } else if (have_log) {
      throw ConfigError("more than one log given ('" + o.log_path + "' and '" + std::string(a) +
                        "'); explain one log at a time, or concatenate them: cat A B | lockstep "
                        "explain -");
    } else {
      o.log_path = a;
      have_log = true;
    }
  }
  return o;
}

int explain_log(const ExplainOptions& o, const explain::SignatureSet& signatures) {
  const bool from_stdin = o.log_path.empty() || o.log_path == "-";
  if (from_stdin && o.log_path.empty() && ::isatty(STDIN_FILENO))
    throw ConfigError(
        "give a log file, or pipe a log into it: lockstep explain FILE, or "
        "COMMAND 2>&1 | lockstep explain -");
  std::ifstream file;
  if (!from_stdin) {
    file.open(o.log_path, std::ios::binary);
    if (!file) throw ConfigError("cannot read the log '" + o.log_path + "'");
  }
  if (from_stdin) std::ios::sync_with_stdio(false);  // only fprintf writes; cin reads faster
  std::istream& in = from_stdin ? std::cin : file;
  const explain::LogScan scan = explain::scan_log(in, signatures);
  if (in.bad()) throw ConfigError("reading the log '" + o.log_path + "' failed");
  const std::string name = from_stdin ? "standard input" : o.log_path;
  if (scan.findings.empty()) {
    explain::print_no_match(stdout, scan, signatures, name);
    return kNothingMatched;
  }
  explain::print_findings(stdout, scan, signatures, name);
  return kExplained;
}

}  // namespace

int explain_command(int argc, char** argv) {
  try {
    const ExplainOptions o = parse_options(argc, argv);
    if (o.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const explain::SignatureSet signatures =
        explain::load_signatures(explain::find_signatures_file(o.signatures_path));
    if (o.list) {
      explain::print_signature_list(stdout, signatures);
      return 0;
    }
    return explain_log(o, signatures);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "lockstep explain: %s\n", e.what());
    return kUsageError;
  }
}

}  // namespace lockstep::cli
