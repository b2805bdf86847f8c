// Helpers of the doctor and explain tests: run the real `lockstep` executable, scratch
// directories, small files.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace lockstep::testing {

using EnvChanges = std::map<std::string, std::optional<std::string>>;

// Runs `lockstep ARGS...` (the binary this build made) to completion.
inline ProcessResult run_lockstep(std::vector<std::string> args, const EnvChanges& env = {},
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  args.insert(args.begin(), LOCKSTEP_CLI_PATH);
  return run_process(args, env, timeout);
}

// A fresh directory under the temporary directory, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "lockstep-cli-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed: " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace lockstep::testing
