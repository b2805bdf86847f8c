// PLACEHOLDER: replaced by the launcher implementation.
#include "cli/commands.h"
namespace lockstep::cli {
int run_command(int, char**) { return 1; }
}
