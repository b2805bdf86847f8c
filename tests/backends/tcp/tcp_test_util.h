// Helpers of the tcp backend's thread tests: a group's config for rank `rank` on loopback, and an
// all_reduce (sum) op over a vector.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/group_config.h"
#include "comm/op.h"
#include "lockstep/core/deadline.h"

namespace lockstep::testing {

inline GroupConfig config_for(const std::string& name, int rank, int size,
                              std::shared_ptr<Store> store,
                              std::chrono::milliseconds timeout = std::chrono::seconds(30),
                              std::string secret = "") {
  return {.name = name,
          .rank = rank,
          .size = size,
          .store = std::move(store),
          .timeout = timeout,
          .advertise_address = "127.0.0.1",
          .hostname = "host" + std::to_string(rank),
          .secret = std::move(secret)};
}

inline Op sum_op(uint64_t seq, std::vector<float>& data,
                 std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  Op op;
  op.kind = OpKind::all_reduce;
  op.seq = seq;
  op.count = data.size();
  op.input = op.output = data.data();
  op.deadline = Deadline::after(timeout);
  return op;
}

}  // namespace lockstep::testing
