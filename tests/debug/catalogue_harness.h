// Jobs of real processes for the catalogue and debug-level tests: each child re-runs this test
// binary in child mode (support/child_mode.h) and joins through env:// over a store that the
// test process hosts. Children report a caught lockstep error as one line,
// "CAUGHT <Type> after_ms=<ms>: <message>", timed from the call that failed.
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "support/child_mode.h"
#include "support/messages.h"
#include "support/subprocess.h"

namespace lockstep::testing::catalogue {

using Env = std::map<std::string, std::optional<std::string>>;

// `world` children running child test `suite_and_test`, ranks 0..world-1, with `extra` added to
// (or overriding) their environment.
class ChildJob {
 public:
  ChildJob(const std::string& suite_and_test, int world, const Env& extra = {})
      : server_({.bind_host = "127.0.0.1"}) {
    for (int r = 0; r < world; ++r) {
      Env env{{"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(world)},
              {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", std::to_string(server_.port())},
              {"LOCKSTEP_USE_AGENT_STORE", "1"}, {"LOCKSTEP_RESTART_COUNT", std::nullopt},
              {"LOCKSTEP_TIMEOUT", "60"},        {"LOCKSTEP_DEBUG", std::nullopt}};
      for (const auto& [k, v] : extra) env[k] = v;
      children_.emplace_back(child_argv(suite_and_test), env);
    }
  }
  TcpStore store() {
    return TcpStore(
        {.host = "127.0.0.1", .port = server_.port(), .timeout = std::chrono::seconds(60)});
  }
  Child& child(int r) { return children_[static_cast<size_t>(r)]; }
  ProcessResult wait(int r) { return child(r).wait(std::chrono::seconds(90)); }
  std::vector<ProcessResult> wait_all() {
    std::vector<ProcessResult> all;
    for (size_t r = 0; r < children_.size(); ++r) all.push_back(wait(static_cast<int>(r)));
    return all;
  }

 private:
  TcpStoreServer server_;
  std::vector<Child> children_;
};

// In a child: prints a line and flushes, so the parent sees it even if the child dies next.
inline void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// In a child: reports a caught error, `since` being when the failing call started.
inline void report(const std::exception& e, Clock::time_point since) {
  const char* type = dynamic_cast<const MismatchError*>(&e)  ? "MismatchError"
                     : dynamic_cast<const NetworkError*>(&e) ? "NetworkError"
                     : dynamic_cast<const TimeoutError*>(&e) ? "TimeoutError"
                     : dynamic_cast<const ConfigError*>(&e)  ? "ConfigError"
                                                             : "other";
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
  say(detail::concat("CAUGHT ", type, " after_ms=", ms, ": ", e.what()));
}

// The after_ms of a child's CAUGHT line (-1: none).
inline long caught_after_ms(const std::string& output) {
  size_t p = output.find("after_ms=");
  return p == std::string::npos ? -1 : std::stol(output.substr(p + 9));
}

}  // namespace lockstep::testing::catalogue
