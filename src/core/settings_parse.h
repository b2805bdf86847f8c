// How settings() reads the environment, for callers that check another environment than this
// process's (`lockstep doctor` checks a job's; tests check malformed values).
#pragma once

#include "lockstep/core/settings.h"

namespace lockstep {

// Parses settings from a getenv-like function. A malformed value throws ConfigError naming the
// variable.
Settings parse_settings(const char* (*getenv_fn)(const char*));

}  // namespace lockstep
