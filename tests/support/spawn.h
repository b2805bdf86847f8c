// Test helpers: ranks as threads (Gloo's spawn), each with its own ProcessGroup over one HashStore.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "lockstep/group/process_group.h"
#include "lockstep/store/hash_store.h"

namespace lockstep::testing {

// Runs fn(rank) for rank in [0, size) on `size` threads, joins them all, and rethrows the first
// exception any of them threw.
void spawn(int size, const std::function<void(int rank)>& fn);

// Like spawn, but hands each thread its rank's ProcessGroup (backend `backend`), all created over
// one fresh HashStore with group name `name`.
void spawn_groups(int size, const std::function<void(ProcessGroup& pg)>& fn,
                  const std::string& backend = "tcp",
                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace lockstep::testing
