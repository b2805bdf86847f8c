#include "memory_mesh.h"

#include <chrono>
#include <thread>

#include "comm/failure.h"
#include "test_op.h"

namespace lockstep::testing {

Op MemoryRank::op(OpKind kind) {
  return next_test_op(seq, kind);
}

void MemoryRank::run(const Op& op) {
  transport->begin_op(op);
  run_collective(*transport, scratch, op);
  transport->end_op();
}

std::vector<std::exception_ptr> with_memory_mesh(const std::shared_ptr<FaultController>& faults,
                                                 const std::function<void(MemoryRank&)>& fn,
                                                 const std::function<void()>& driver) {
  const int size = faults->size();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      MemoryTransport transport(faults, r);
      MemoryRank me{.rank = r, .size = size, .transport = &transport};
      try {
        fn(me);
        transport.goodbye();
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        transport.abort(error_class_of(std::current_exception()),
                        what_of(std::current_exception()));
      }
      faults->finished(r);
    });
  std::exception_ptr driver_error;
  try {
    if (driver) driver();
  } catch (...) {
    driver_error = std::current_exception();
    faults->release(kAnyRank, kAnyRank);
  }
  for (auto& t : threads) t.join();
  if (driver_error) std::rethrow_exception(driver_error);
  return errors;
}

std::string what_of_error(const std::exception_ptr& e) {
  return e ? what_of(e) : "";
}

}  // namespace lockstep::testing
