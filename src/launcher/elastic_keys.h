// The store keys of an elastic job's rendezvous (elastic_sync.h, [Rounds]).
#pragma once

#include <string>

namespace lockstep::launcher::elastic_keys {

inline std::string elastic(const std::string& rest) {
  return "lockstep_launcher/elastic/" + rest;
}
inline std::string attempt_key(int attempt, const std::string& rest) {
  return "lockstep_launcher/a" + std::to_string(attempt) + "/" + rest;
}

inline std::string next_id() {
  return elastic("next_id");
}
inline std::string open_round() {
  return elastic("round");
}
inline std::string finished() {
  return elastic("finished");
}
inline std::string gone(int id) {
  return elastic("gone/" + std::to_string(id));
}
inline std::string count(int round) {
  return elastic("r" + std::to_string(round) + "/count");
}
inline std::string entry(int round, int64_t k) {
  return elastic("r" + std::to_string(round) + "/n/" + std::to_string(k));
}
inline std::string closed(int round) {
  return elastic("r" + std::to_string(round) + "/closed");
}

inline std::string failed(int attempt) {
  return attempt_key(attempt, "failed");
}
inline std::string done(int attempt, int node) {
  return attempt_key(attempt, "done/" + std::to_string(node));
}
inline std::string done_count(int attempt) {
  return attempt_key(attempt, "done_count");
}
inline std::string left(int attempt, int node) {
  return attempt_key(attempt, "left/" + std::to_string(node));
}

}  // namespace lockstep::launcher::elastic_keys
