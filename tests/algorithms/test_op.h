// The ops of a test rank that drives a Transport itself (mesh_harness.h, memory_mesh.h).
#pragma once

#include <chrono>
#include <cstdint>

#include "comm/op.h"

namespace lockstep::testing {

// A fresh op of `kind` with the rank's next sequence number (++seq) and a 60 s deadline (a
// failsafe: no test waits for it).
inline Op next_test_op(uint64_t& seq, OpKind kind) {
  Op o;
  o.kind = kind;
  o.seq = ++seq;
  o.deadline = Deadline::after(std::chrono::seconds(60));
  return o;
}

}  // namespace lockstep::testing
