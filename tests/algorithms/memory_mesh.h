// Test harness for the algorithms over the in-memory transport (src/testing): `size` ranks as
// threads of this process, each with a MemoryTransport on one FaultController that the test's
// own thread steers meanwhile (hold, release, cut), so that deliveries happen in an order the
// test chooses rather than by chance. Mirrors mesh_harness.h (real sockets).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "testing/fault_controller.h"
#include "testing/memory_transport.h"

namespace lockstep::testing {

struct MemoryRank {
  int rank = 0;
  int size = 1;
  MemoryTransport* transport = nullptr;
  Scratch scratch;
  uint64_t seq = 0;

  // A fresh op of `kind` with the next sequence number and a 60 s deadline (a failsafe: no test
  // waits for it).
  Op op(OpKind kind);
  // Runs op with run_collective (the automatic choice, or op.algorithm).
  void run(const Op& op);
};

// Runs fn on faults->size() threads, one rank each, and driver on this thread meanwhile; joins
// them. A rank whose fn throws aborts its transport with the error (its class and text, as a
// group does), one that returns says goodbye; either way it is finished() on the controller
// then. Returns each rank's exception (null: fn returned). A driver that throws releases every
// link, joins the ranks and rethrows.
std::vector<std::exception_ptr> with_memory_mesh(const std::shared_ptr<FaultController>& faults,
                                                 const std::function<void(MemoryRank&)>& fn,
                                                 const std::function<void()>& driver = {});

// what() of e ("" for null).
std::string what_of_error(const std::exception_ptr& e);

}  // namespace lockstep::testing
