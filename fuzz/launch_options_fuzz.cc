// The command line of `lockstep run` (src/launcher/options.h): parse_launch_options, on the
// arguments after `run`.
//
// Input: the arguments, separated by NUL bytes (as in /proc/PID/cmdline). Checked: a bad command
// line is a UsageError, and what parses is within the documented ranges.
#include "fuzz_input.h"
#include "launcher/options.h"

using namespace lockstep;
using namespace lockstep::launcher;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = fuzz::split(fuzz::as_text(data, size), '\0');
  try {
    const LaunchOptions o = parse_launch_options(args);
    if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.master_port < 0 ||
        o.master_port > 65535 || o.max_restarts < 0 || o.monitor_interval.count() < 1 ||
        o.rdzv_timeout.count() < 0 || o.term_timeout.count() < 0)
      fuzz::broken("parse_launch_options accepted a value out of its range");
    if (o.program.size() > args.size()) fuzz::broken("more program arguments than arguments");
  } catch (const UsageError&) {
  }
  return 0;
}
