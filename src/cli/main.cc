// lockstep: one executable, several subcommands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "cli/commands.h"
#include "lockstep/core/error.h"

namespace {

struct Subcommand {
  const char* name;
  int (*fn)(int, char**);
  const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"run", lockstep::cli::run_command, "start and supervise the ranks of a job (like torchrun)"},
    {"bench", lockstep::cli::bench_command, "benchmark collectives, nccl-tests style"},
    {"doctor", lockstep::cli::doctor_command, "check a job's environment before it starts"},
    {"explain", lockstep::cli::explain_command, "explain the failures in a log, with fixes"},
    {"trace", lockstep::cli::trace_command,
     "merge flight-recorder dumps into a timeline and a verdict"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: lockstep <command> [options]\n\ncommands:\n");
  for (const auto& c : kSubcommands) std::fprintf(out, "  %-8s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'lockstep <command> --help' explains a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("lockstep %s\n", LOCKSTEP_VERSION);  // project(VERSION) in CMakeLists.txt
    return 0;
  }
  for (const auto& c : kSubcommands) {
    if (cmd == c.name) {
      try {
        return c.fn(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "lockstep %s: error: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "lockstep: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
