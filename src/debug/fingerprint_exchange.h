// The all_gathers of the fingerprint check (fingerprint_check.h), over one of two routes:
//   - backend: an all_gather of host memory through the group's own backend (tcp, shm, mpi, and
//     auto, whose host ops go to its host backend);
//   - store: through the group's store, for a backend that cannot move host memory (nccl): its
//     device ops are checked over a host path, never with host buffers handed to NCCL.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "comm/backend.h"
#include "comm/op.h"
#include "lockstep/store/store.h"

namespace lockstep::debug {

enum class FingerprintRoute : uint8_t { backend, store };

// backend when `backend` moves host memory (device_problem of the host is empty), else store.
FingerprintRoute fingerprint_route(const Backend& backend);

// One rank's `bytes` bytes at `mine` to every rank; all[r * bytes ...] gets rank r's. `step`
// tells apart the exchanges of one op (1, 2, 3). Keys: "<group>/detail/<op.seq>/<step>/<rank>";
// each rank deletes its keys of op seq - 2, which every rank has read by then (it reached seq
// - 1's exchange, so it finished seq - 2's). Waits under op.deadline, in slices that look for
// another rank's abort note: TimeoutError names the ranks that never posted, NetworkError
// repeats the note.
void store_all_gather(Store& store, const std::string& group, int rank, int size, const Op& op,
                      int step, const void* mine, size_t bytes, void* all);

}  // namespace lockstep::debug
