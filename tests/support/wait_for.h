// Waiting for an event with a bounded deadline, in place of a fixed sleep that merely hopes the
// event has happened by then: a file that another process creates, a condition to poll.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::testing {

// Polls ready() every few milliseconds until it holds (true) or timeout passes (false).
inline bool wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Waits until every one of paths exists; false when timeout passes first.
inline bool wait_for_files(const std::vector<std::string>& paths,
                           std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        for (const auto& p : paths)
          if (!std::filesystem::exists(p)) return false;
        return true;
      },
      timeout);
}

// Creates an empty file at path: a marker that another process waits for with wait_for_files.
inline void create_marker(const std::string& path) {
  std::ofstream(path).flush();
}

}  // namespace lockstep::testing
