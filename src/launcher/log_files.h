// Where the ranks' output goes: the console (with [rankN] prefixes) and/or one log file per rank
// per attempt (ROOT/attempt_N/rank_R.log).
//
// Meanings, following torchrun: --redirects S sends streams S to the files only; --tee S sends
// them to both; --local-ranks-filter limits the console to some local ranks. A file gets the
// streams named by --tee and --redirects, or both streams when neither is given. --tee or
// --redirects without --log-dir log into a fresh directory under $TMPDIR (or /tmp).
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"
#include "launcher/rank_output.h"

namespace lockstep::launcher {

// The log root for this run: --log-dir (created if missing), a new temporary directory when
// --tee/--redirects need one, or "" for no files. Throws Error naming the directory when it
// cannot be created.
std::string prepare_log_root(const LaunchOptions& options);

// A private directory under $TMPDIR (or /tmp), made on first use of path() and removed with
// everything in it on destruction, unless kept. Holds the ranks' error files when there is no
// --log-dir.
class ScratchDir {
 public:
  ScratchDir() = default;
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  // Throws Error naming the directory when it cannot be created.
  const std::string& path();
  // Leaves the directory in place (the failure summary names a file in it).
  void keep() { kept_ = true; }

 private:
  std::string path_;
  bool kept_ = false;
};

// Creates and returns ROOT/attempt_N ("" when root is "").
std::string attempt_log_dir(const std::string& root, int attempt);

// The route of every local rank's streams.
std::vector<OutputRoute> output_routes(const LaunchOptions& options, bool with_files);

}  // namespace lockstep::launcher
