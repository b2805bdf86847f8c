// lockstep run: parses and checks the options (bad input exits 2 before anything starts), then
// hands over to the launcher (src/launcher/).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "launcher/launcher.h"
#include "launcher/options.h"

namespace lockstep::cli {

int run_command(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  launcher::LaunchOptions options;
  try {
    options = launcher::parse_launch_options(args);
    if (options.help) {
      std::fputs(launcher::launch_help().c_str(), stdout);
      return 0;
    }
    launcher::check_launch_options(options);
  } catch (const launcher::UsageError& e) {
    std::fprintf(stderr, "lockstep run: error: %s\n", e.what());
    return 2;
  }
  try {
    return launcher::run_launcher(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep run: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace lockstep::cli
