// Where the workers are: each publishes a record in the job's store (under "rpc/"), claims its
// name, and reads everyone's; shutdown marks each worker done there.
//
//   rpc/worker/<rank>  "<name>|<host>|<pid>|<address>|<port>"
//   rpc/name/<name>    the rank that holds the name
//   rpc/done/<rank>    set when that worker's shutdown has finished its own calls
//   rpc/left           how many workers saw every other done (the store's host waits for them)
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/rpc/rpc.h"
#include "lockstep/store/store.h"

namespace lockstep::rpc {

struct WorkerRecord {
  WorkerInfo info;
  std::string address;  // what to connect to
  uint16_t port = 0;
};

std::string format_record(const WorkerRecord& record);
// NetworkError naming the rank when it is malformed.
WorkerRecord parse_record(const std::string& text, int rank);

// Checks a worker name: 1 to 128 of A-Z a-z 0-9 _ - . : (ConfigError otherwise).
void check_worker_name(const std::string& name);

// Claims `me`'s name, publishes its record, and waits up to `timeout` for all `world_size`
// workers; returns their records by rank. ConfigError when the name is taken or a rank joined
// twice; TimeoutError naming the ranks that never came.
std::vector<WorkerRecord> join_directory(Store& store, const WorkerRecord& me, int world_size,
                                         std::chrono::milliseconds timeout);

std::string done_key(int rank);
inline constexpr const char* kLeftKey = "left";

}  // namespace lockstep::rpc
